package proxy

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// bigEventUpstream streams a Responses create whose first event,
// response.created, is about size bytes (its instructions echoed back).
func bigEventUpstream(t *testing.T, id string, size int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp := `{"id":"` + id + `","object":"response","status":"in_progress","instructions":"` +
		strings.Repeat("i", size) + `"}`
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			w.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":" + resp + "}\n\n")
			w.Flush()
			w.WriteString("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"" + id +
				"\",\"status\":\"completed\"}}\n\n")
		})
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// TestResponsesStreamBigFirstEventRecorded checks that a streamed create
// whose response.created event is 4 MiB is relayed whole and recorded, so
// that its owner can continue it.
func TestResponsesStreamBigFirstEventRecorded(t *testing.T) {
	addr := bigEventUpstream(t, "resp_bigfirst1", 4<<20)
	e := newEnv(t, func(y string) string {
		return strings.Replace(y, "models:\n", "  - {name: big-beta, family: beta, base_url: \"http://"+addr+
			"/v1\", api_key: k}\nmodels:\n  - {id: big-model, upstreams: [big-beta]}\n", 1)
	})
	status, _, body := e.do("POST", "/v1/router/beta/v1/responses", bearer(keyA), `{"model":"big-model","stream":true,"input":"hi"}`)
	if status != 200 || !bytes.Contains(body, []byte("event: response.completed")) || bytes.Contains(body, []byte("event: error")) {
		t.Fatalf("stream: %d, %d bytes, tail %q", status, len(body), tail(body))
	}
	rec, err := e.store.GetResponse("resp_bigfirst1")
	if err != nil || rec.Owner != "team-a" || rec.Deployment != "big-beta" {
		t.Fatalf("record: %+v, %v", rec, err)
	}
}

// TestResponsesStreamFirstEventOverBound checks that a first event larger
// than limits.max_response_bytes fails the stream clearly: it ends with the
// Responses error event, and nothing is recorded.
func TestResponsesStreamFirstEventOverBound(t *testing.T) {
	addr := bigEventUpstream(t, "resp_bigfirst2", 2<<20)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: big-beta, family: beta, base_url: \"http://"+addr+
			"/v1\", api_key: k}\nmodels:\n  - {id: big-model, upstreams: [big-beta]}\n", 1)
		return y + "limits: {max_response_bytes: 1048576}\n"
	})
	status, _, body := e.do("POST", "/v1/router/beta/v1/responses", bearer(keyA), `{"model":"big-model","stream":true,"input":"hi"}`)
	if status != 200 || !bytes.Contains(body, []byte("event: error")) || !bytes.Contains(body, []byte("larger than its limit")) {
		t.Fatalf("stream: %d, %d bytes, tail %q", status, len(body), tail(body))
	}
	if _, err := e.store.GetResponse("resp_bigfirst2"); err == nil {
		t.Fatal("recorded")
	}
}
