package upstream

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// The names of the wire (package proxy/upstream/wire) that the rest of the
// gateway uses, kept here so that it speaks to one package of the upstream
// side: the request it builds, the Cancel it gives a call, and what an
// upstream error was.

// Request is an upstream call's request as the gateway writes it (see
// wire.Request).
type Request = wire.Request

// Cancel ends an upstream call from another goroutine (see wire.Cancel).
type Cancel = wire.Cancel

// ErrCanceled is the error of an upstream call that its Cancel ended (see
// wire.ErrCanceled).
var ErrCanceled = wire.ErrCanceled

// AcquireRequest returns an empty Request from the pool.
func AcquireRequest() *Request { return wire.AcquireRequest() }

// ReleaseRequest returns r to the pool; r must not be used after.
func ReleaseRequest(r *Request) { wire.ReleaseRequest(r) }

// AppendHeader appends the header line name: value.
func AppendHeader(dst, name, value []byte) []byte { return wire.AppendHeader(dst, name, value) }

// EndHead ends a head with the body's Content-Length, which a GET or HEAD
// without a body does not send, and the blank line (see wire.EndHead).
func EndHead(dst, method []byte, bodyLen int) []byte { return wire.EndHead(dst, method, bodyLen) }

// IsDialError reports whether err is a failure to reach the deployment at
// all (no connection, or none free in time): nothing was sent, so the call
// may go to another deployment.
func IsDialError(err error) bool { return wire.IsDialError(err) }

// OpenConns returns the upstream connections open in the process, those
// being dialed included.
func OpenConns() int64 { return wire.OpenConns() }

// DeadlineMoves reports whether a connection's deadline in force, current,
// must be moved to want, for a timeout of d (see wire.DeadlineMoves).
func DeadlineMoves(current, want time.Time, d time.Duration) bool {
	return wire.DeadlineMoves(current, want, d)
}

// Stale reports whether the call that filled resp and failed did so on a
// reused connection that the upstream had closed (see wire.Stale).
func Stale(resp *fasthttp.Response) bool { return wire.Stale(resp) }
