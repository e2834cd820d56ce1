package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/store"
	"github.com/modelgate/gateway/store/s3test"
)

// blobServer is the S3 server of the proxy's tests of object storage.
var blobServer = s3test.Server{Port: 7412}

// newBlobEnv is e's gateway with the file bytes on the real S3 server: the records in a
// Pebble of their own, the bytes in a bucket of their own.
func newBlobEnv(t *testing.T) (*testEnv, *store.Blobs) {
	t.Helper()
	e := newEnv(t, nil)
	endpoint := blobServer.Endpoint(t)
	records, err := store.OpenPebble(t.TempDir(), store.PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bl, err := store.OpenBlobs(records, store.S3Options{Endpoint: endpoint, Bucket: blobServer.Bucket(t),
		Region: "us-east-1", AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bl.Close() })
	gw, err := New(e.cfg, Options{Store: bl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b := *e
	b.gw = gw
	return &b, bl
}

// uploadInProcess uploads data as keyA's PNG file and returns the answer.
func uploadInProcess(e *testEnv, data []byte) (int, []byte, string) {
	body, ct := multipartBody(filePart("pic.png", "", data))
	resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/files", "", ct, body)
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), string(resp.Header.Peek("Retry-After"))
}

// inlineBody is an alpha messages body that references the file id.
func inlineBody(id string) []byte {
	return []byte(`{"model":"chat-model","max_tokens":16,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"` +
		id + `"}},{"type":"text","text":"describe"}]}]}`)
}

// TestFilesBlobsUnavailable stops the S3 server: an upload and a message that inlines a
// file answer 503 in the alpha shape with Retry-After; chat, messages without file
// references, file listings and metadata keep working; once S3 is back both work again.
func TestFilesBlobsUnavailable(t *testing.T) {
	e, _ := newBlobEnv(t)
	data := testImage(pngHead, 3000)
	status, body, _ := uploadInProcess(e, data)
	if status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
	var f alphaFile
	json.Unmarshal(body, &f)
	if resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/messages", "", "application/json", inlineBody(f.ID)); resp.StatusCode() != 200 {
		t.Fatalf("inline with S3 up: %d %s", resp.StatusCode(), resp.Body())
	}

	blobServer.Kill(t)
	defer blobServer.Restart(t)
	status, body, retry := uploadInProcess(e, data)
	if status != 503 || retry == "" {
		t.Fatalf("upload with S3 down: %d retry-after %q: %s", status, retry, body)
	}
	assertAlphaError(t, status, body, 503, "api_error")
	if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), s3test.SecretKey) {
		t.Fatalf("the answer names the object storage: %s", body)
	}
	resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/messages", "", "application/json", inlineBody(f.ID))
	if resp.StatusCode() != 503 || len(resp.Header.Peek("Retry-After")) == 0 {
		t.Fatalf("inline with S3 down: %d %s", resp.StatusCode(), resp.Body())
	}
	assertAlphaError(t, resp.StatusCode(), resp.Body(), 503, "api_error")

	for _, c := range []struct{ path, body string }{
		{"/v1/router/beta/v1/chat/completions", chatBody("")},
		{"/v1/router/alpha/v1/messages", `{"model":"chat-model","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/router/beta/v1/responses", `{"model":"chat-model","input":"hi"}`},
	} {
		if resp := serveInProcess(e, "POST", c.path, "", "application/json", []byte(c.body)); resp.StatusCode() != 200 {
			t.Fatalf("%s with S3 down: %d %s", c.path, resp.StatusCode(), resp.Body())
		}
	}
	for _, path := range []string{"/v1/router/alpha/v1/files", "/v1/router/alpha/v1/files/" + f.ID} {
		if resp := serveInProcess(e, "GET", path, "", "", nil); resp.StatusCode() != 200 {
			t.Fatalf("GET %s with S3 down: %d %s", path, resp.StatusCode(), resp.Body())
		}
	}

	blobServer.Restart(t)
	if status, body, _ := uploadInProcess(e, data); status != 200 {
		t.Fatalf("upload once S3 is back: %d %s", status, body)
	}
	if resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/messages", "", "application/json", inlineBody(f.ID)); resp.StatusCode() != 200 {
		t.Fatalf("inline once S3 is back: %d %s", resp.StatusCode(), resp.Body())
	}
	var m bytes.Buffer
	e.gw.WritePrometheus(&m)
	if !strings.Contains(m.String(), "# HELP gateway_store_blob_orphans_removed_total ") ||
		!strings.Contains(m.String(), "\ngateway_store_blob_orphans_removed_total 0\n") {
		t.Fatalf("no orphan metric:\n%s", linesWith(m.String(), "orphan"))
	}
}

// TestFilesBlobsKilledDuringUploads kills the S3 server while 200 uploads run on 4
// connections, and starts it again while they still run: every upload answered 200 is
// readable afterwards, every other one answered 503 with Retry-After, and the listing
// holds exactly the uploads answered 200.
func TestFilesBlobsKilledDuringUploads(t *testing.T) {
	e, bl := newBlobEnv(t)
	const total, workers = 200, 4
	var (
		next, answered atomic.Int64
		mu             sync.Mutex
		ok             = map[string][]byte{}
		failed         int
		killAt         = make(chan struct{})
		restartAt      = make(chan struct{})
		wg             sync.WaitGroup
	)
	var killOnce, restartOnce sync.Once
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				data := testImage(pngHead, 2000+int(i))
				status, body, retry := uploadInProcess(e, data)
				mu.Lock()
				switch {
				case status == 200:
					var f alphaFile
					json.Unmarshal(body, &f)
					ok[f.ID] = data
				case status == 503 && retry != "":
					failed++
				default:
					mu.Unlock()
					t.Errorf("upload %d: %d %s", i, status, body)
					return
				}
				mu.Unlock()
				switch n := answered.Add(1); {
				case n == 50:
					killOnce.Do(func() { close(killAt) })
				case n == 130:
					restartOnce.Do(func() { close(restartAt) })
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-killAt:
		blobServer.Kill(t)
	case <-done:
	}
	select {
	case <-restartAt:
	case <-done:
	}
	blobServer.Restart(t)
	<-done
	if t.Failed() {
		return
	}
	t.Logf("%d uploads answered 200, %d answered 503", len(ok), failed)
	if failed == 0 || len(ok)+failed != total {
		t.Fatalf("%d answered 200 and %d 503 of %d: the outage was not seen", len(ok), failed, total)
	}
	for id, data := range ok {
		got, err := bl.AppendFileData(nil, "team-a", id, time.Now())
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("file %s answered 200 is not readable: %v", id, err)
		}
	}
	listed := map[string]bool{}
	after := ""
	for {
		files, more, err := bl.ListFiles("team-a", store.ListQuery{Now: time.Now(), Limit: store.MaxListLimit, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			listed[f.ID] = true
			after = f.ID
		}
		if !more {
			break
		}
	}
	if len(listed) != len(ok) {
		t.Fatalf("%d files listed, %d uploads answered 200", len(listed), len(ok))
	}
	for id := range ok {
		if !listed[id] {
			t.Fatalf("file %s answered 200 is not listed", id)
		}
	}
	// Inlined through the gateway too.
	for id := range ok {
		resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/messages", "", "application/json", inlineBody(id))
		if resp.StatusCode() != 200 {
			t.Fatalf("inline %s: %d %s", id, resp.StatusCode(), resp.Body())
		}
		break
	}
}
