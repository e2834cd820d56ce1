package load

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// testServer is a loopback fasthttp server that counts what it serves.
//
//	/ok              200 "hello"
//	/fail            every 3rd request (1-based) 500, else 200
//	/reset           every 4th request reset without a response, else 200
//	/slow?ms=N       200 after N ms
//	/sse?n=N&cut=M   an SSE stream of N events (only M if cut), flushed one by one
//	/sse-wait?ms=N   one event, N ms of nothing, a second event
//	/idle            one event, then a ping comment every 20 ms until the client goes
//	/session         200; records the x-session-id header and the body
type testServer struct {
	URL string

	requests  atomic.Int64
	failSeq   atomic.Int64
	fails     atomic.Int64
	resets    atomic.Int64
	idleOpen  atomic.Int64
	idleMax   atomic.Int64
	mu        sync.Mutex
	sessions  map[string]int
	bodies    map[string]int
	srv       *fasthttp.Server
	listener  net.Listener
	serveDone chan struct{}
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{
		URL:       "http://" + ln.Addr().String(),
		sessions:  map[string]int{},
		bodies:    map[string]int{},
		listener:  ln,
		serveDone: make(chan struct{}),
	}
	s.srv = &fasthttp.Server{Handler: s.handle, ReadTimeout: 30 * time.Second}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		// Serve may not have registered ln yet, so Shutdown alone may miss it.
		_ = s.srv.Shutdown()
		_ = ln.Close()
		<-s.serveDone
	})
	return s
}

func (s *testServer) handle(ctx *fasthttp.RequestCtx) {
	n := s.requests.Add(1)
	switch string(ctx.Path()) {
	case "/ok":
		ctx.SetBodyString("hello")
	case "/fail":
		if s.failSeq.Add(1)%3 == 0 {
			s.fails.Add(1)
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		}
		ctx.SetBodyString("maybe")
	case "/reset":
		if n%4 == 0 {
			s.resets.Add(1)
			s.reset(ctx)
			return
		}
		ctx.SetBodyString("ok")
	case "/slow":
		time.Sleep(time.Duration(ctx.QueryArgs().GetUintOrZero("ms")) * time.Millisecond)
		ctx.SetBodyString("slow")
	case "/sse":
		s.sse(ctx, ctx.QueryArgs().GetUintOrZero("n"), ctx.QueryArgs().GetUintOrZero("cut"))
	case "/sse-wait":
		s.sseWait(ctx, time.Duration(ctx.QueryArgs().GetUintOrZero("ms"))*time.Millisecond)
	case "/idle":
		s.idle(ctx)
	case "/session":
		s.mu.Lock()
		s.sessions[string(ctx.Request.Header.Peek("x-session-id"))]++
		s.bodies[string(ctx.PostBody())]++
		s.mu.Unlock()
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}

// reset closes the connection with an RST and no response.
func (s *testServer) reset(ctx *fasthttp.RequestCtx) {
	raw := ctx.Conn()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if tc, ok := raw.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	})
}

func sseHeaders(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
}

// sse writes n events of mixed shapes, cut short after cut events if cut > 0.
func (s *testServer) sse(ctx *fasthttp.RequestCtx, n, cut int) {
	sseHeaders(ctx)
	if cut > 0 {
		n = min(n, cut)
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		_, _ = w.WriteString(": hello\n\nevent: noop\n\n")
		for i := range n {
			switch i % 3 {
			case 0:
				fmt.Fprintf(w, "event: delta\ndata: {\"i\":%d}\n\n", i)
			case 1:
				fmt.Fprintf(w, "data: {\"i\":%d}\r\ndata: more\r\n\r\n", i)
			default:
				fmt.Fprintf(w, "data\n\n")
			}
			_ = w.Flush()
		}
	})
}

func (s *testServer) sseWait(ctx *fasthttp.RequestCtx, wait time.Duration) {
	sseHeaders(ctx)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		_, _ = w.WriteString("data: first\n\n")
		_ = w.Flush()
		time.Sleep(wait)
		_, _ = w.WriteString("data: second\n\n")
	})
}

func (s *testServer) idle(ctx *fasthttp.RequestCtx) {
	sseHeaders(ctx)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		open := s.idleOpen.Add(1)
		defer s.idleOpen.Add(-1)
		for {
			m := s.idleMax.Load()
			if open <= m || s.idleMax.CompareAndSwap(m, open) {
				break
			}
		}
		_, _ = w.WriteString("event: start\ndata: {}\n\n")
		for w.Flush() == nil {
			time.Sleep(20 * time.Millisecond)
			_, _ = w.WriteString(": ping\n\n")
		}
	})
}
