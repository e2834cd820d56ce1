package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
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

// A multipart Content-Type is read in any case, with its boundary quoted or
// not; one that is not multipart/form-data, or names no boundary, is refused.
func TestFilesUploadContentTypeAnyCase(t *testing.T) {
	e := newBenchEnv(t)
	body, ct := multipartBody(filePart("a.png", "image/png", testImage(pngHead, 40)))
	boundary := ct[strings.Index(ct, "boundary=")+len("boundary="):]
	for ct, want := range map[string]int{
		"multipart/form-data; boundary=" + boundary:               200,
		"Multipart/Form-Data; Boundary=" + boundary:               200,
		`multipart/form-data;boundary="` + boundary + `"`:         200,
		"MULTIPART/FORM-DATA;\tBOUNDARY=" + boundary:              200,
		"multipart/mixed; boundary=" + boundary:                   400,
		"multipart/form-data; charset=utf-8":                      400,
		"application/x-www-form-urlencoded; boundary=" + boundary: 400,
	} {
		resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/files", "", ct, body)
		if resp.StatusCode() != want {
			t.Errorf("Content-Type %q: %d %s, want %d", ct, resp.StatusCode(), resp.Body(), want)
		}
	}
}
