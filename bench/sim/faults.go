package sim

import (
	"net"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// faultPath is the control endpoint that sets the server-wide fault from
// another process: PUT with a body in x-sim-fault's syntax (SetFault), an
// empty body to clear it. No provider has the path; it needs no key, as the
// simulator guards nothing.
var faultPath = []byte("/_sim/fault")

// serveFault answers the control endpoint.
func (s *Server) serveFault(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPut() {
		ctx.Error("use PUT with a fault in x-sim-fault's syntax", fasthttp.StatusMethodNotAllowed)
		return
	}
	var f Fault
	if err := ParseFault(ctx.Request.Body(), &f); err != nil {
		ctx.Error(err.Error(), fasthttp.StatusBadRequest)
		return
	}
	s.SetFault(f)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

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
