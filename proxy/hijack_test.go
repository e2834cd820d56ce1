package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/rawio"
	"github.com/modelgate/gateway/proxy/trace/tracetest"
)

// openStreams is how many streams the gateway writes outside its server.
func (g *Gateway) openStreams() int {
	g.streams.mu.Lock()
	defer g.streams.mu.Unlock()
	return g.streams.open
}

const pacedHeaders = "x-sim-events: 3\r\nx-sim-event-delay: 5ms\r\n"

// readStream reads one answer from br and checks it is a whole stream.
func readStream(t *testing.T, br *bufio.Reader, what string) *fasthttp.Response {
	t.Helper()
	resp := new(fasthttp.Response)
	if err := resp.Read(br); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	body := resp.Body()
	if resp.StatusCode() != 200 || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("%s: status %d, body ending %q", what, resp.StatusCode(), body[max(len(body)-40, 0):])
	}
	return resp
}

// A stream is written outside the server (the server does not hold the
// connection while it lasts), and an SDK's connection goes on after it: two
// streams, then a plain call, on one kept-alive connection.
func TestStreamsThenCallOnOneConnection(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	stream := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 {
		// The stream's first event waits for the client to see the head:
		// the stream is open meanwhile.
		io.WriteString(conn, rawChat(keyA, "x-sim-first-event: 300ms\r\n"+pacedHeaders, stream))
		var resp fasthttp.Response
		resp.StreamBody = true
		if err := resp.Header.Read(br); err != nil {
			t.Fatalf("stream %d head: %v", i, err)
		}
		if n := e.gw.openStreams(); n != 1 {
			t.Fatalf("stream %d: %d streams written outside the server, want 1", i, n)
		}
		if !resp.Header.IsHTTP11() || resp.Header.ConnectionClose() || string(resp.Header.Peek("X-Request-Id")) == "" ||
			string(resp.Header.Peek("Transfer-Encoding")) != "chunked" || string(resp.Header.Peek("X-Sim-Deployment")) == "" {
			t.Fatalf("stream %d head:\n%s", i, resp.Header.Header())
		}
		resp.Header.Reset()
		// The rest of the answer, read as a whole response from its head on.
		rest := readChunkedBody(t, br)
		if !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
			t.Fatalf("stream %d: body ending %q", i, rest[max(len(rest)-40, 0):])
		}
	}
	io.WriteString(conn, rawChat(keyA, "", `{"model":"plain-model","messages":[{"role":"user","content":"hi"}]}`))
	var resp fasthttp.Response
	if err := resp.Read(br); err != nil || resp.StatusCode() != 200 || !bytes.Contains(resp.Body(), []byte(`"chat.completion"`)) {
		t.Fatalf("plain call after two streams: %v %d %.200q", err, resp.StatusCode(), resp.Body())
	}
	if n := e.gw.openStreams(); n != 0 {
		t.Fatalf("%d streams open after they ended", n)
	}
}

// readChunkedBody reads a chunked body from br, as the bytes it carries.
func readChunkedBody(t *testing.T, br *bufio.Reader) []byte {
	t.Helper()
	var resp fasthttp.Response
	// A head of its own in front of the chunks makes them a response fasthttp reads.
	r := io.MultiReader(strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), br)
	if err := resp.Read(bufio.NewReader(&oneByteReader{r})); err != nil {
		t.Fatal(err)
	}
	return resp.Body()
}

// oneByteReader reads one byte at a time, so that a bufio.Reader over it
// reads nothing past what it is asked for.
type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// The head and body the client gets from a stream written outside the
// server are those fasthttp writes, byte for byte: the same stream through
// a gateway with two servers, whose streams stay in fasthttp's hands, is
// compared (the Date header apart).
func TestHijackedStreamBytesAreFasthttps(t *testing.T) {
	e := newEnv(t, nil)
	hijacked := streamBytes(t, e.ln.Addr().String())
	if n := e.gw.openStreams(); n != 0 {
		t.Fatalf("%d streams open", n)
	}
	// A second server on the same gateway: streams are written by fasthttp.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.gw.NewServer()
	go srv.Serve(e.gw.Listener(ln))
	t.Cleanup(func() { srv.Shutdown() })
	if e.gw.streams.server() != nil {
		t.Fatal("a gateway with two servers hijacks its streams")
	}
	served := streamBytes(t, ln.Addr().String())
	if hijacked != served {
		t.Fatalf("hijacked:\n%q\nfasthttp's:\n%q", hijacked, served)
	}
}

// The Date header and the simulator's cf-ray, which is random.
var dateLine = regexp.MustCompile(`(?mi)^(Date|cf-ray): .*\r\n`)

// streamBytes makes a stream call with Connection: close on a new
// connection to addr and returns all it got, the Date header taken out.
func streamBytes(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"same"}]}`
	io.WriteString(conn, rawChat(keyA, "x-request-id: req-same\r\nConnection: close\r\n"+pacedHeaders, body))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("Connection: close\r\n")) || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n\r\n0\r\n\r\n")) {
		t.Fatalf("answer:\n%q", b)
	}
	// The simulator's ids and timestamps differ from call to call.
	s := dateLine.ReplaceAllString(string(b), "")
	return regexp.MustCompile(`"(id|created|system_fingerprint)":("[^"]*"|\d+)`).ReplaceAllString(s, "")
}

// A shutdown waits for the streams written outside the server, as the
// server's own shutdown waits for the requests it serves, and their
// connections close after them; past its context, it gives up.
func TestShutdownWaitsForHijackedStreams(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, rawChat(keyA, "x-sim-first-event: 300ms\r\nx-sim-events: 3\r\nx-sim-event-delay: 500ms\r\n", body))
	var resp fasthttp.Response
	if err := resp.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	e.gw.Drain()
	if err := e.srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	err := e.gw.WaitStreams(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitStreams with a stream open and its context done: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- e.gw.WaitStreams(context.Background()) }()
	rest := readChunkedBody(t, br)
	if !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream was cut: %q", rest)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the stream, in a shutdown: %d bytes, %v; want the connection closed", n, err)
	}
}

// A connection served again after a stream that the client then leaves idle
// past the idle timeout closes without an answer, as a kept-alive one does:
// no 408 for a request nobody sent.
func TestIdleAfterStreamClosesQuietly(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(e.cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := gw.NewServer()
	srv.ReadTimeout, srv.IdleTimeout = 500*time.Millisecond, 500*time.Millisecond
	go srv.Serve(gw.Listener(ln))
	t.Cleanup(func() { srv.Shutdown() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, rawChat(keyA, pacedHeaders, body))
	readStream(t, br, "stream")
	b, err := io.ReadAll(br)
	if len(b) != 0 || err != nil {
		t.Fatalf("after the idle timeout: %q, %v; want the connection closed without an answer", b, err)
	}
}

// A shutdown closes a connection whose next request is awaited after a
// stream, as fasthttp's closes its idle connections, and does not wait for
// its idle timeout.
func TestShutdownClosesIdleAfterStream(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, rawChat(keyA, pacedHeaders, body))
	readStream(t, br, "stream")
	e.gw.Drain()
	if err := e.srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.gw.WaitStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the shutdown: %d bytes, %v; want the connection closed", n, err)
	}
}

// A stream's hijack handler returns as soon as the stream is handed to its
// goroutine: fasthttp frees the connection's reader and the RequestCtx when
// its hijack handler returns, not when the stream ends. The handler's frame
// is looked for among the goroutines' stacks while the stream is open.
func TestStreamLetsGoOfTheServersReader(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	// Open for 10 s unless the client leaves, which it does once it has seen.
	io.WriteString(conn, rawChat(keyA, "x-sim-first-event: 300ms\r\nx-sim-events: 5\r\nx-sim-event-delay: 2s\r\n", body))
	var resp fasthttp.Response
	if err := resp.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // an outcome awaited, not a speed
	for hijackHandlerRuns() {
		if time.Now().After(deadline) {
			t.Fatal("the hijack handler still runs while its stream is written")
		}
		time.Sleep(time.Millisecond)
	}
	if n := e.gw.openStreams(); n != 1 {
		t.Fatalf("%d streams open, want the one", n)
	}
}

// A stream that waits for its upstream's next event holds no goroutine: its
// connection is parked (rawio.Conn.Park), and a resumer goes on with it once
// the event comes. The stream's frames are looked for among the goroutines'
// stacks while it waits between two events 2 s apart; it is then read whole.
func TestIdleStreamHoldsNoGoroutine(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	parks := rawio.Parks()
	io.WriteString(conn, rawChat(keyA, "x-sim-first-event: 300ms\r\nx-sim-events: 3\r\nx-sim-event-delay: 2s\r\n", body))
	var resp fasthttp.Response
	if err := resp.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // an outcome awaited, not a speed
	for rawio.Parks() == parks || goroutineRuns("(*heldStream).relay(") {
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine holds the waiting stream (%d parks)", rawio.Parks()-parks)
		}
		time.Sleep(time.Millisecond)
	}
	if n := e.gw.openStreams(); n != 1 {
		t.Fatalf("%d streams open, want the one", n)
	}
	if rest := readChunkedBody(t, br); !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream was cut: %q", rest)
	}
}

// hijackHandlerRuns reports whether a goroutine runs heldStream.serve.
func hijackHandlerRuns() bool { return goroutineRuns("(*heldStream).serve(") }

// goroutineRuns reports whether a goroutine's stack has the frame.
func goroutineRuns(frame string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			// A frame is "pkg.(*T).m(args)"; "created by pkg.(*T).m in ..." is not one.
			return bytes.Contains(buf[:n], []byte(frame))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A hijacked stream's access line is the one fasthttp's writing of the same
// stream gives (its times apart): the call is ended from the stream's
// goroutine once fasthttp has taken back the RequestCtx.
func TestHijackedStreamAccessLine(t *testing.T) {
	e := newEnv(t, nil)
	access := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(access, nil))
	gw, _, ln := listenGateway(t, e.cfg, Options{Logger: log, AccessLog: accesslog.New(access, accesslog.JSON)})
	line := func(addr string) map[string]any {
		t.Helper()
		access.mu.Lock()
		access.b.Reset()
		access.mu.Unlock()
		streamBytes(t, addr)
		deadline := time.Now().Add(10 * time.Second) // the line comes after the stream's end
		for !strings.Contains(access.String(), `"msg":"request"`) {
			if time.Now().After(deadline) {
				t.Fatal("no access line")
			}
			time.Sleep(time.Millisecond)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(access.String())), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"time", "latency", "ttfb"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("no %s in %v", k, m)
			}
			delete(m, k)
		}
		return m
	}
	hijacked := line(ln.Addr().String())
	if n := gw.openStreams(); n != 0 {
		t.Fatalf("%d streams open", n)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := gw.NewServer()
	go srv.Serve(gw.Listener(ln2))
	t.Cleanup(func() { srv.Shutdown() })
	served := line(ln2.Addr().String())
	if !reflect.DeepEqual(hijacked, served) {
		t.Fatalf("hijacked stream's access line:\n%v\nfasthttp's:\n%v", hijacked, served)
	}
	if hijacked["status"] != 200.0 || hijacked["key_id"] == "" || hijacked["stream"] != true {
		t.Fatalf("access line %v", hijacked)
	}
}

// A hijacked stream's server span carries the response id and model its
// events gave: they are read when the call ends on the stream's goroutine,
// after fasthttp took back the RequestCtx.
func TestHijackedStreamTraceIdentity(t *testing.T) {
	r := tracetest.NewReceiver()
	defer r.Close()
	e := newEnv(t, func(y string) string {
		return y + `tracing: {endpoint: "` + r.URL() + `", service_name: gw-hijack, timeout: 2s}` + "\n"
	})
	conn := dialGateway(t, e) // e's server serves the gateway's listener: its streams are hijacked
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, rawChat(keyA, "Connection: close\r\n"+pacedHeaders, body))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"id":"([^"]+)".*?"model":"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no id and model in the stream:\n%s", b)
	}
	var server *tracetest.Span
	eventually(t, "the stream's server span exported", func() bool {
		e.gw.FlushTraces(context.Background())
		for _, s := range r.Spans() {
			if s.Service == "gw-hijack" && s.Kind == "server" {
				server = &s
				return true
			}
		}
		return false
	})
	if server.Attrs["gen_ai.response.id"] != string(m[1]) || server.Attrs["gen_ai.response.model"] != string(m[2]) {
		t.Fatalf("server span: response id %q, model %q; the stream sent %q, %q", server.Attrs["gen_ai.response.id"],
			server.Attrs["gen_ai.response.model"], m[1], m[2])
	}
}

// A hijacked stream gives its request body's copies back once its head is
// decided: while it is written, the gateway's request-body budget holds none
// of them, and the next call reads its body into a buffer a stream gave
// back. The stream's access line still counts the body it was sent.
func TestStreamLetsGoOfItsRequestBody(t *testing.T) {
	e := newEnv(t, nil)
	conn := dialGateway(t, e)
	br := bufio.NewReader(conn)
	prompt := strings.Repeat("lighthouse ", 8<<10/11) // about 8 KiB: kept by a pooled call before
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	io.WriteString(conn, rawChat(keyA, "x-sim-first-event: 300ms\r\nx-sim-events: 5\r\nx-sim-event-delay: 2s\r\n", body))
	var resp fasthttp.Response
	if err := resp.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // an outcome awaited, not a speed
	for hijackHandlerRuns() || e.gw.bodiesHeld.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of request bodies held while the stream is written", e.gw.bodiesHeld.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if status, _ := e.chat(keyA); status != 200 {
		t.Fatalf("a call beside the stream: %d", status)
	}
	if n := e.gw.openStreams(); n != 1 {
		t.Fatalf("%d streams open, want the one", n)
	}
}

// A stream whose upstream stops between two events is ended at the idle
// timeout while it is parked: the park's deadline wakes it (no goroutine
// waits on the connection's own), the client gets the family's error frame
// and the end of the body, and the upstream connection is closed.
func TestParkedStreamIdleTimeout(t *testing.T) {
	closed := make(chan struct{})
	up := tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if req.Read(br) != nil {
			return
		}
		event := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[]}\n\n"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(event), event)
		io.Copy(io.Discard, br) // until the gateway closes it
		close(closed)
	})
	addr := gatewayFor(t, up, "timeouts: {first_byte: 10s, idle: 300ms}")
	parks := rawio.Parks()
	answers, bodies := exchange(t, addr, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"+
		"Authorization: Bearer key-1\r\nConnection: close\r\nContent-Length: 41\r\n\r\n"+`{"model":"m","stream":true,"messages":[]}`)
	if len(answers) != 1 || answers[0].StatusCode != 200 {
		t.Fatalf("want one 200 stream, got %d answers %q", len(answers), bodies)
	}
	if !strings.Contains(bodies[0], `"c1"`) || !strings.Contains(bodies[0], "error") {
		t.Fatalf("want the event, then an error frame: %q", bodies[0])
	}
	if rawio.Parks() == parks {
		t.Fatal("the stream never parked")
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream connection was not closed")
	}
}
