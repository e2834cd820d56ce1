package store

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestPutOnClosedKeptAliveConnection: a service that drops a kept-alive connection
// without answering the request written on it (as one that closed it while idle) costs
// the write nothing: the object and the part are put again, whole, once.
func TestPutOnClosedKeptAliveConnection(t *testing.T) {
	var mu sync.Mutex
	served := map[net.Conn]int{} // requests seen on each connection
	var bodies [][]byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := r.Context().Value(connKey{}).(net.Conn)
		mu.Lock()
		served[c]++
		n := served[c]
		if n == 1 {
			bodies = append(bodies, body)
		}
		mu.Unlock()
		if n > 1 { // the second request on a connection: drop it unanswered
			hc, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				hc.Close()
			}
			return
		}
		w.Header().Set("ETag", `"e"`)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Start()
	defer srv.Close()

	objs := fakeS3Objects(t, srv.URL)
	for i, want := range []string{"first", "second", "third"} {
		if err := objs.put("obj", []byte(want)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// the bodies are signed in chunks (aws-chunked): each holds its bytes whole
	if len(bodies) != 3 || !bytes.Contains(bodies[1], []byte("\r\nsecond\r\n")) || !bytes.Contains(bodies[2], []byte("\r\nthird\r\n")) {
		t.Fatalf("bodies answered: %q", bodies)
	}
}

type connKey struct{}

// TestS3UnparsedRequestAskedOnceMore: a service that answers a request 400 BadRequest
// ("An error occurred when parsing the HTTP request", as versitygw was seen to answer one
// request of many at once) is asked once more for a put or a get, and only once; a 400 of
// another code is an answer about the request and final.
func TestS3UnparsedRequestAskedOnceMore(t *testing.T) {
	var mu sync.Mutex
	refuse := map[string]int{} // "METHOD code": answers still to refuse with code
	seen := map[string]int{}   // requests per method
	stored := []byte("data")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen[r.Method]++
		code := ""
		for _, c := range []string{"BadRequest", "InvalidArgument"} {
			if refuse[r.Method+" "+c] > 0 {
				refuse[r.Method+" "+c]--
				code = c
				break
			}
		}
		mu.Unlock()
		if code != "" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>An error occurred when parsing the HTTP request.</Message></Error>`)
			return
		}
		w.Header().Set("ETag", `"e"`)
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Length", "4")
			w.Header().Set("Last-Modified", "Sat, 28 Nov 2026 05:00:00 GMT")
			w.Write(stored)
		}
	}))
	defer srv.Close()
	objs := fakeS3Objects(t, srv.URL)
	try := func(method, code string, refusals int) error {
		mu.Lock()
		refuse[method+" "+code], seen[method] = refusals, 0
		mu.Unlock()
		if method == http.MethodPut {
			return objs.put("obj", stored)
		}
		got, err := objs.appendObject(nil, "obj", int64(len(stored)))
		if err == nil && !bytes.Equal(got, stored) {
			t.Fatalf("get: %q", got)
		}
		return err
	}
	for _, m := range []string{http.MethodPut, http.MethodGet} {
		if err := try(m, "BadRequest", 1); err != nil || seen[m] != 2 {
			t.Fatalf("%s refused once as unparsed: %v after %d requests, want success after 2", m, err, seen[m])
		}
		if err := try(m, "BadRequest", 2); err == nil || seen[m] != 2 {
			t.Fatalf("%s refused twice: %v after %d requests, want the failure after 2", m, err, seen[m])
		}
		if err := try(m, "InvalidArgument", 1); err == nil || seen[m] != 1 {
			t.Fatalf("%s refused as InvalidArgument: %v after %d requests, want the failure after 1", m, err, seen[m])
		}
	}
}

// A service that answers 400 BadRequest before it read the request's body (as
// versitygw did under load) can leave Go's transport writing the body after the
// answer: the put asked once more reads its bytes through a reader of its own, and the
// send that ended reads no more of them, and the bytes the second send delivers are
// whole. (The race a shared reader rewound for the second send had with the first's
// write was seen once in CI, under the race detector with versitygw; this test does not
// make it happen at will.)
func TestS3EarlyAnswerThenSendAgain(t *testing.T) {
	var mu sync.Mutex
	var got []byte
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadRequest</Code><Message>An error occurred when parsing the HTTP request.</Message></Error>`)
			w.(http.Flusher).Flush()
			// Read slowly: the transport goes on writing, from its reader,
			// while the put is asked once more.
			var b [4096]byte
			for {
				if _, err := r.Body.Read(b[:]); err != nil {
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = body
		mu.Unlock()
		w.Header().Set("ETag", `"e"`)
	}))
	defer srv.Close()
	objs := fakeS3Objects(t, srv.URL)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than the socket takes at once
	if err := objs.put("obj", data); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 2 || len(got) < len(data) || !bytes.Contains(got, data[:4096]) {
		t.Fatalf("%d requests, the second's body %d bytes; want 2 and the bytes whole", requests, len(got))
	}
}

// fakeS3Objects returns the objects of a bucket at url, an S3 service a test
// fakes, with path-style addresses and throwaway credentials.
func fakeS3Objects(t *testing.T, url string) *objects {
	t.Helper()
	o := S3Options{Endpoint: url, Bucket: "bucket", Region: "us-east-1", PathStyle: true, AccessKey: "k", SecretKey: "s"}
	o.EnsureDefaults()
	objs, err := newObjects(o)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
