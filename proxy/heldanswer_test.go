package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
)

// heldUpstream streams a chat answer of events events of about 1 KiB as
// fast as the gateway takes them, and says on finished when it wrote the
// last of them.
type heldUpstream struct {
	events   int
	finished chan struct{}
}

func newHeldUpstream(t testing.TB, events int) (*heldUpstream, string) {
	h := &heldUpstream{events: events, finished: make(chan struct{}, 1024)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h.serve}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return h, ln.Addr().String()
}

func (h *heldUpstream) serve(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/event-stream")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		for range h.events {
			w.Write(sseEvent)
		}
		w.WriteString("data: [DONE]\n\n")
		if w.Flush() == nil {
			h.finished <- struct{}{}
		}
	})
}

// heldEnv is the fixture with model held-model on one beta deployment of
// conns connections, answering events events, with
// limits.max_held_answer_bytes held (empty: the default) and timeouts.connect
// connect; timeouts.client_write_idle is a minute. Its gateway also serves
// on a listener whose connections have a small send buffer (see
// listenSmallSend).
func heldEnv(t testing.TB, conns, events int, held, connect string) (*testEnv, *heldUpstream, string) {
	h, addr := newHeldUpstream(t, events)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", fmt.Sprintf("  - {name: held-beta, family: beta, base_url: \"http://%s/v1\", "+
			"api_key: k, max_conns: %d}\nmodels:\n  - {id: held-model, upstreams: [held-beta]}\n", addr, conns), 1)
		y = strings.Replace(y, "connect: 2s, first_byte: 10s, idle: 10s}",
			"connect: "+connect+", first_byte: 10s, idle: 10s, client_write_idle: 60s}", 1)
		if held != "" {
			y += "limits: {max_held_answer_bytes: " + held + "}\n"
		}
		return y
	})
	return e, h, listenSmallSend(t, e)
}

// listenSmallSend serves e's gateway on a loopback listener whose connections
// have a send buffer of 8 KiB (16 KiB once the kernel doubled it), and
// returns its address. On loopback the kernel otherwise grows a connection's
// send buffer to megabytes, which would take a whole answer from the gateway
// however little the client reads: the case under test is a client whose
// kernel and network hold less than the answer.
func listenSmallSend(t testing.TB, e *testEnv) string {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8<<10) })
		return err
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.gw.NewServer()
	go srv.Serve(e.gw.Listener(ln))
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// heldRequest is a raw streamed chat call on held-model.
const heldRequest = "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + keyA +
	"\r\nContent-Length: 39\r\n\r\n{\"model\":\"held-model\",\"stream\":true}   "

// sendAndStopReading sends a streamed call to addr from a connection with a
// receive buffer of 4 KiB (set before connecting, so that the window it
// offers is small from the start), and never reads its answer.
func sendAndStopReading(t testing.TB, addr string) net.Conn {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return err
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, heldRequest); err != nil {
		t.Fatal(err)
	}
	return c
}

// streamWhole makes a streamed call on held-model and checks that it is
// answered whole.
func streamWhole(t testing.TB, e *testEnv) (int, []byte) {
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"model":"held-model","stream":true}`)
	if status == 200 && !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream did not end whole: %d bytes, tail %q", len(body), tail(body))
	}
	return status, body
}

// TestFinishedAnswerFreesConnection checks that a streamed answer that the
// upstream finished, and whose rest fits limits.max_held_answer_bytes, does
// not hold its upstream connection while its client does not read: two
// such clients on a deployment of two connections, and a third caller is
// served (it would wait for timeouts.connect and be answered 503 busy while
// the two held theirs until timeouts.client_write_idle).
func TestFinishedAnswerFreesConnection(t *testing.T) {
	e, h, addr := heldEnv(t, 2, 60, "", "10s") // 60 KiB answers, the default bound of 64 KiB
	for range 2 {
		sendAndStopReading(t, addr)
	}
	for range 2 {
		<-h.finished // the upstream wrote both answers whole
	}
	if status, body := streamWhole(t, e); status != 200 {
		t.Fatalf("the third caller: %d %s", status, body)
	}
}

// TestAnswerOverHeldBoundKeepsConnection checks that an answer whose rest is
// longer than limits.max_held_answer_bytes keeps its connection while its
// client does not read, as before the bound: the gateway holds no more than
// the bound for a client, and the third caller is answered busy.
func TestAnswerOverHeldBoundKeepsConnection(t *testing.T) {
	e, h, addr := heldEnv(t, 2, 60, "16384", "1s")
	for range 2 {
		sendAndStopReading(t, addr)
	}
	for range 2 {
		<-h.finished
	}
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"model":"held-model","stream":true}`)
	assertFamilyError(t, family.Beta, status, body, 503, "busy")
}

// TestHeldAnswersUnderLoad measures the pool of a deployment of 4
// connections under 100 clients that never read their 60 KiB streamed
// answers: how many get their answer from the upstream, how long the upstream
// took to write them all, what the gateway's heap holds meanwhile, and
// whether the pool is free for a caller afterwards; with the read-ahead off
// (max_held_answer_bytes -1) and on (the default). Logged; the figures are in
// docs/operations.md.
func TestHeldAnswersUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("100 clients")
	}
	const clients, conns = 100, 4
	for _, held := range []string{"-1", ""} {
		t.Run("held="+held, func(t *testing.T) {
			e, h, addr := heldEnv(t, conns, 60, held, "2s")
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sendAndStopReading(t, addr)
				}()
			}
			wg.Wait()
			// Off, the calls past the pool's 4 are answered busy after the 2 s
			// they queue: 5 s sees every answer the upstream will write. On,
			// every call is answered: a minute is for a loaded machine.
			limit := time.Minute
			if held == "-1" {
				limit = 5 * time.Second
			}
			wait := time.NewTimer(limit)
			defer wait.Stop()
			answered, last := 0, start
		count:
			for answered < clients {
				select {
				case <-h.finished:
					answered, last = answered+1, time.Now()
				case <-wait.C:
					break count
				}
			}
			took := last.Sub(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			status, _ := streamWhole(t, e)
			inflight := e.gw.state.Load().deps["held-beta"].InFlight()
			t.Logf("%d clients that never read, %d connections: %d answers written by the upstream in %v; "+
				"then a caller answered %d, and %d calls still in flight; heap %+.1f MiB",
				clients, conns, answered, took.Round(time.Millisecond), status, inflight,
				float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20))
			if held == "" && (answered != clients || status != 200) {
				t.Fatalf("with the default bound: %d of %d answered, the next caller %d", answered, clients, status)
			}
		})
	}
}

// TestSlowClientStreamWholeThroughStalls checks that a client that reads a
// long stream slowly, its writes stalling again and again (each starting a
// read-ahead that fills or is caught up with), gets every event, in order.
func TestSlowClientStreamWholeThroughStalls(t *testing.T) {
	const events = 1024 // 1 MiB: many times the bound and the buffers
	e, _, addr := heldEnv(t, 1, events, "", "2s")
	c := sendAndStopReading(t, addr)
	var resp fasthttp.Response
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	if err := resp.Read(bufio.NewReaderSize(slowReader{c}, 4<<10)); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat(sseEvent, events)
	want = append(want, "data: [DONE]\n\n"...)
	if resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), want) {
		t.Fatalf("status %d, %d bytes of %d, tail %q", resp.StatusCode(), len(resp.Body()), len(want), tail(resp.Body()))
	}
	if status, body := streamWhole(t, e); status != 200 {
		t.Fatalf("the next call: %d %s", status, body)
	}
}

// slowReader is a client that reads at most 4 KiB a millisecond.
type slowReader struct{ c net.Conn }

func (r slowReader) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond) // the slow client under test, not a wait
	return r.c.Read(p[:min(len(p), 4<<10)])
}
