package upstream

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// Request is an upstream call's request as the gateway writes it: the head,
// built by the caller in one pass (AppendRequestLine, AppendHeader,
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
	// head, set by Relay.Send for its call, is where the transport keeps
	// the answer's header lines (see wire.ReadPlainHead).
	head *wire.Head
	// fresh, set by Relay.Send after Relay.Redial, has the transport write
	// the request on a connection dialled for it, not on a pooled one.
	fresh bool
	// ttfb, set by Relay.Send, takes the time the answer's head took (see
	// headRead).
	ttfb *peakEWMA
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
	r.Head, r.Body, r.head, r.fresh, r.Cancel, r.ttfb = r.Head[:0], nil, nil, false, nil, nil
	requests.Put(r)
}

// headRead records, for routing, the time from sent (monoNow's, as the
// request's write began: the write may wait for the answer's first byte) to
// the end of the answer's head, whose status is status, or to the first-byte
// timeout that err may be: a deployment whose heads time out is as slow as
// that. A failure's answer (a 5xx, a 429) or any other error is the
// health's to count, not a time: a deployment that fails fast must not look
// fast.
func (r *Request) headRead(sent int64, status int, err error) {
	switch {
	case r.ttfb == nil:
		return
	case err != nil && !IsTimeout(err), err == nil && (FailureStatus(status) || status == 429):
		return
	}
	now := monoNow()
	r.ttfb.observe(time.Duration(now-sent), now)
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

// AppendRequestLine appends the request line of a call to path on d, with
// the query string when not empty, and d's Host header. The path is d's base
// path and the endpoint's, byte for byte: the gateway's paths are its own,
// and an id taken from the client's path was checked before it got here.
func (d *Deployment) AppendRequestLine(dst, method []byte, path string, query []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, d.basePath...)
	dst = append(dst, path...)
	if len(query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, query...)
	}
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, d.host...)
	return append(dst, "\r\n"...)
}

// AppendHeader appends the header line name: value.
func AppendHeader(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendCredentials appends the provider's auth headers: alpha x-api-key
// (and anthropic-version unless versioned, when the client sent its own),
// beta a Bearer token, gamma x-goog-api-key.
func (d *Deployment) AppendCredentials(dst []byte, versioned bool) []byte {
	dst = append(dst, d.credential...)
	if d.family == family.Alpha && !versioned {
		dst = append(dst, "Anthropic-Version: 2023-06-01\r\n"...)
	}
	return dst
}

// credentialLine is the auth header line of a deployment of fam with key.
func credentialLine(fam family.Family, key string) string {
	switch fam {
	case family.Alpha:
		return "X-Api-Key: " + key + "\r\n"
	case family.Beta:
		return "Authorization: Bearer " + key + "\r\n"
	case family.Gamma:
		return "X-Goog-Api-Key: " + key + "\r\n"
	}
	return ""
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
