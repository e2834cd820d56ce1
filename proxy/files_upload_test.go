package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// finisherHidingStore is an engine that ignores store.FileFinisher: it hands PutFile a
// reader that hides the hook.
type finisherHidingStore struct{ store.Store }

func (s finisherHidingStore) PutFile(f store.File, r io.Reader, max int64) (store.File, error) {
	return s.Store.PutFile(f, struct{ io.Reader }{r}, max)
}

// TestFilesUploadNeedsFinisher checks the guard against an engine that never calls
// FinishFile: the upload fails on the gateway's side and the file it stored, without its
// expiry and without the rest of the form, is taken back.
func TestFilesUploadNeedsFinisher(t *testing.T) {
	e := newEnv(t, nil)
	before := e.filesState()
	gw, err := New(e.cfg, Options{Store: finisherHidingStore{e.store}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hiding := *e
	hiding.gw = gw
	for _, parts := range [][]formPart{
		{filePart("a.png", "image/png", testImage(pngHead, 3000)), fieldPart("expires_in_seconds", "3600")},
		{fieldPart("expires_in_seconds", "3600"), filePart("a.png", "image/png", testImage(pngHead, 3000))},
	} {
		body, ct := multipartBody(parts...)
		resp := serveInProcess(&hiding, "POST", "/v1/router/alpha/v1/files", "", ct, body)
		assertFilesError(t, family.Alpha, resp.StatusCode(), resp.Body(), 500, "api_error", "cannot store the file")
		if after := e.filesState(); after != before {
			t.Fatalf("the store changed from %s to %s", before, after)
		}
	}
	// the same upload through the real engine is stored
	body, ct := multipartBody(filePart("a.png", "image/png", testImage(pngHead, 3000)))
	if resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/files", "", ct, body); resp.StatusCode() != 200 ||
		!bytes.Contains(resp.Body(), []byte(`"expires_at":"`)) {
		t.Fatalf("upload: %d %s", resp.StatusCode(), resp.Body())
	}
	if n := e.fileCount(); n != 1 {
		t.Fatalf("%d files stored, want 1", n)
	}
}
