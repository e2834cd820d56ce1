package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
)

// pinUpstream serves chat completions as the X-Mode request header says:
// "hold" answers once release is closed, after saying so on arrived;
// "sse" streams n events of about 1 KiB as fast as the gateway takes them,
// and says on gone when a write failed because the gateway let go.
type pinUpstream struct {
	arrived, gone chan struct{}
	release       chan struct{}
	releaseOnce   sync.Once
	events        int
}

// releaseAll lets every held call answer.
func (h *pinUpstream) releaseAll() { h.releaseOnce.Do(func() { close(h.release) }) }

func newPinUpstream(t testing.TB, events int) (*pinUpstream, string) {
	h := &pinUpstream{arrived: make(chan struct{}, 16), gone: make(chan struct{}, 16),
		release: make(chan struct{}), events: events}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h.serve}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return h, ln.Addr().String()
}

var sseEvent = []byte("data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 1000) + "\"}}]}\n\n")

func (h *pinUpstream) serve(ctx *fasthttp.RequestCtx) {
	if string(ctx.Request.Header.Peek("X-Mode")) == "hold" {
		h.arrived <- struct{}{}
		<-h.release
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"x"}`)
		return
	}
	ctx.SetContentType("text/event-stream")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		for i := 0; i < h.events; i++ {
			w.Write(sseEvent)
			if err := w.Flush(); err != nil {
				h.gone <- struct{}{}
				return
			}
		}
		w.WriteString("data: [DONE]\n\n")
		w.Flush()
	})
}

// pinEnv is the fixture with model hold-model on one beta deployment of
// one connection, and timeouts.client_write_idle set to idle.
func pinEnv(t testing.TB, events int, idle string) (*testEnv, *pinUpstream) {
	h, addr := newPinUpstream(t, events)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: hold-beta, family: beta, base_url: \"http://"+addr+
			"/v1\", api_key: k, max_conns: 1}\nmodels:\n  - {id: hold-model, upstreams: [hold-beta]}\n", 1)
		return strings.Replace(y, "idle: 10s}", "idle: 10s, client_write_idle: "+idle+"}", 1)
	})
	t.Cleanup(h.releaseAll) // before the gateway stops: a held call must end
	return e, h
}

func pinHeaders(mode string) map[string]string {
	h := bearer(keyA)
	h["X-Mode"] = mode
	return h
}

// TestFullPoolAnswersBusy checks that a call finding every connection of
// its deployment in use queues for timeouts.connect and is then answered 503
// busy with Retry-After, in the family's shape, without the deployment being
// counted as failing.
func TestFullPoolAnswersBusy(t *testing.T) {
	e, h := pinEnv(t, 1, "60s")
	first := make(chan int)
	go func() {
		status, _, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), `{"model":"hold-model"}`)
		first <- status
	}()
	<-h.arrived // the only connection is taken
	for range 2 {
		status, hdr, body := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), `{"model":"hold-model"}`)
		assertFamilyError(t, family.Beta, status, body, 503, "busy")
		if string(hdr.Peek("Retry-After")) != "1" {
			t.Fatalf("Retry-After %q", hdr.Peek("Retry-After"))
		}
	}
	h.releaseAll()
	if status := <-first; status != 200 {
		t.Fatalf("the held call: %d", status)
	}
	// two busy answers did not exclude the deployment (health.failures is 2)
	if status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), `{"model":"hold-model"}`); status != 200 {
		t.Fatalf("after the pool freed: %d %s", status, body)
	}
}

// sseRequest is a raw streamed chat call on hold-model.
const sseRequest = "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + keyA +
	"\r\nX-Mode: sse\r\nContent-Length: 39\r\n\r\n{\"model\":\"hold-model\",\"stream\":true}   "

// dialSmall connects to the gateway with a receive buffer of rcvbuf bytes:
// small, so that a client that stops reading blocks the gateway's writes soon.
func dialSmall(t *testing.T, e *testEnv, rcvbuf int) *net.TCPConn {
	c, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	tc.SetReadBuffer(rcvbuf)
	t.Cleanup(func() { tc.Close() })
	return tc
}

// TestClientThatStopsReadingIsDropped checks that a stream to a client that
// takes no byte for timeouts.client_write_idle is dropped, which lets the
// upstream connection go: the next call on the one-connection deployment is
// served.
func TestClientThatStopsReadingIsDropped(t *testing.T) {
	e, h := pinEnv(t, 32<<10, "300ms") // 32 MiB of events: more than any socket buffers hold
	c := dialSmall(t, e, 4<<10)
	io.WriteString(c, sseRequest)
	select { // an event, not a timing: the upstream sees its connection go
	case <-h.gone:
	case <-time.After(2 * time.Minute):
		t.Fatal("the gateway never let go of the upstream connection")
	}
	h.releaseAll()
	if status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), `{"model":"hold-model"}`); status != 200 {
		t.Fatalf("the next call: %d %s", status, body)
	}
}

// TestSlowClientKeepsItsStream checks that a client reading slowly, but
// reading, gets its whole stream though it lasts longer than
// timeouts.client_write_idle.
func TestSlowClientKeepsItsStream(t *testing.T) {
	e, _ := pinEnv(t, 4<<10, "300ms") // 4 MiB of events
	c := dialSmall(t, e, 64<<10)
	io.WriteString(c, sseRequest)
	start := time.Now()
	var got bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		time.Sleep(10 * time.Millisecond) // the slow client under test, not a wait
		c.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if bytes.Contains(got.Bytes(), []byte("data: [DONE]\n\n")) || err != nil {
			break
		}
	}
	if !bytes.Contains(got.Bytes(), []byte("data: [DONE]\n\n")) || bytes.Contains(got.Bytes(), []byte(`"error"`)) {
		t.Fatalf("the stream did not end whole: %d bytes, tail %q", got.Len(), tail(got.Bytes()))
	}
	t.Logf("%d bytes in %v", got.Len(), time.Since(start))
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }
