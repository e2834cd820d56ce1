package sim

import (
	"bufio"
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// Hold is a beta deployment whose streamed chat answers send HoldFirst, then
// wait for Release before they send HoldRest and end: a stream that stays in
// flight for as long as a test wants (draining, active-stream metrics,
// concurrency limits). It answers every request that way.
type Hold struct {
	// Started receives once per answer, after HoldFirst is flushed; it holds
	// up to 16 before an answer waits for a reader.
	Started chan struct{}
	addr    string
	release chan struct{}
	once    sync.Once
	srv     *fasthttp.Server
}

// The two parts of a held answer.
const (
	HoldFirst = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"hold-model","choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
	HoldRest  = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"hold-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
)

// ListenHold serves a Hold on addr ("127.0.0.1:0" for any port).
func ListenHold(addr string) (*Hold, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := &Hold{Started: make(chan struct{}, 16), addr: ln.Addr().String(), release: make(chan struct{})}
	h.srv = &fasthttp.Server{Handler: h.serve}
	go h.srv.Serve(ln)
	return h, nil
}

// Addr is the address the Hold listens on.
func (h *Hold) Addr() string { return h.addr }

// Release lets every held answer, and every later one, end.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// Close releases the answers and stops the server.
func (h *Hold) Close() error {
	h.Release()
	return h.srv.Shutdown()
}

func (h *Hold) serve(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/event-stream")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		w.WriteString(HoldFirst)
		w.Flush()
		h.Started <- struct{}{}
		<-h.release
		w.WriteString(HoldRest)
		w.Flush()
	})
}
