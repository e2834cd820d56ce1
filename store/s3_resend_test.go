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

	o := S3Options{Endpoint: srv.URL, Bucket: "bucket", Region: "us-east-1", PathStyle: true, AccessKey: "k", SecretKey: "s"}
	o.EnsureDefaults()
	objs, err := newObjects(o)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"first", "second", "third"} {
		if err := objs.put("obj", bytes.NewReader([]byte(want)), int64(len(want))); err != nil {
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
