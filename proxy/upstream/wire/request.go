package wire

import (
	"errors"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"
)

// Request is an upstream call's request as the gateway writes it: the head,
// built by the caller in one pass (upstream's AppendRequestLine, AppendHeader,
// AppendCredentials, EndHead), and the body, both written as they stand.
// Building a fasthttp.Request header by header, then serialising it, cost a
// call about 1 µs (BenchmarkPrepare); appending the lines costs a fifth.
//
// fasthttp's client still carries the call, for its connection pool and its
// error handling: it is given a request of its own whose body stream points
// back here, and the transport writes Head and Body instead of that request.
type Request struct {
	Head []byte
	Body []byte
	// Cancel, when not nil, can end the call from another goroutine: the
	// transport attaches the connection it uses to it (see Cancel).
	Cancel *Cancel

	req fasthttp.Request // what the client is given; see raw
	raw raw
	// head, given to Do for the call, is where the transport keeps the
	// answer's header lines (see ReadPlainHead).
	head *Head
	// fresh, given to Do after upstream's Relay.Redial, has the transport
	// write the request on a connection dialled for it, not on a pooled one.
	fresh bool
}

// raw marks a fasthttp.Request as a Request's: it is that request's body
// stream, which the transport looks for.
type raw struct{ r *Request }

// Read is never called: the transport writes the Request itself.
func (raw) Read([]byte) (int, error) { return 0, errRawBody }

var errRawBody = errors.New("upstream: a request's head and body are written by the transport")

var requests = sync.Pool{New: func() any {
	r := new(Request)
	r.raw.r = r
	// The client only reads the URL's scheme, which must be its own (http:
	// TLS is the dialer's); parsed once here, it is never parsed again.
	r.req.SetRequestURI("http://upstream/")
	r.req.URI()
	r.req.SetBodyStream(&r.raw, 0) // once: nothing on the client's path resets it
	return r
}}

// maxHeldHead is the largest head buffer kept for reuse; a client's headers
// may run to the server's bound, which a pooled buffer should not keep.
const maxHeldHead = 16 << 10

// AcquireRequest returns an empty Request from the pool.
func AcquireRequest() *Request { return requests.Get().(*Request) }

// ReleaseRequest returns r to the pool; r must not be used after.
func ReleaseRequest(r *Request) {
	if cap(r.Head) > maxHeldHead {
		r.Head = nil
	}
	r.Head, r.Body, r.head, r.fresh, r.Cancel = r.Head[:0], nil, nil, false, nil
	requests.Put(r)
}

// Do makes the call r with hc, a client of NewClient, into resp (see the
// transport's RoundTrip): the answer's header lines go to head when it is
// not nil (see ReadPlainHead), and fresh has the request written on a
// connection dialled for it, not on a pooled one (see Stale). r is written
// whole by the time Do returns.
func (r *Request) Do(hc *fasthttp.HostClient, resp *fasthttp.Response, head *Head, fresh bool) error {
	r.head, r.fresh = head, fresh
	return hc.Do(r.client(), resp)
}

// client returns the request fasthttp's client is given for r.
func (r *Request) client() *fasthttp.Request { return &r.req }

// headOnly reports whether the answer to r has no body whatever its headers
// say: r is a HEAD request.
func (r *Request) headOnly() bool {
	return len(r.Head) > 5 && string(r.Head[:5]) == "HEAD "
}

// rawRequest returns the Request that req was made for, or nil.
func rawRequest(req *fasthttp.Request) *Request {
	if m, ok := req.BodyStream().(*raw); ok {
		return m.r
	}
	return nil
}

// AppendHeader appends the header line name: value.
func AppendHeader(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// EndHead ends a head with the body's Content-Length, which a GET or HEAD
// without a body does not send, and the blank line.
func EndHead(dst, method []byte, bodyLen int) []byte {
	if bodyLen > 0 || (string(method) != "GET" && string(method) != "HEAD") {
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, int64(bodyLen), 10)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}
