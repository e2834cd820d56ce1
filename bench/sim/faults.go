package sim

import (
	"net"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// armedFault is the server-wide fault set by SetFault, with the number of
// requests it still applies to when it is limited (Fault.Times).
type armedFault struct {
	f    Fault
	left atomic.Int64
}

// takeFault sets *f to the server-wide fault, if one applies to this
// request; a limited one is used up one request at a time.
func (s *Server) takeFault(f *Fault) {
	*f = Fault{}
	a := s.fault.Load()
	if a == nil {
		return
	}
	if a.f.Times > 0 && a.left.Add(-1) < 0 {
		return
	}
	*f = a.f
}

// setRetryAfter sets the retry-after header of a status fault.
func setRetryAfter(ctx *fasthttp.RequestCtx, f *Fault) {
	if f.RetryAfter != "" {
		ctx.Response.Header.Set("retry-after", f.RetryAfter)
	}
}

// dropAfterAnswer lets fasthttp write the answer in ctx as usual, then closes
// the connection without a Connection: close header, as a server does when
// its keep-alive timeout ends right after an answer.
func dropAfterAnswer(ctx *fasthttp.RequestCtx) {
	ctx.Hijack(func(c net.Conn) { c.Close() })
}
