package proxy

import (
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream"
)

// The head of the request a call sends upstream (see send): built in the
// call's buffer from the client's head, with what never reaches a provider
// left out and the deployment's own credentials put in.

// appendHead appends the head of the upstream request to path on dep with a
// body of bodyLen bytes: the request line to the deployment's URL (with the
// client's query string only where forwardQuery says), the client's
// end-to-end headers as the server read them but the stripped ones, the
// deployment's credentials, the request id and the body's length.
func (c *call) appendHead(dst []byte, dep *upstream.Deployment, path string, bodyLen int) []byte {
	h := &c.ctx.Request.Header
	var query []byte
	if c.forwardQuery() {
		query = c.ctx.URI().QueryString()
	}
	dst = dep.AppendRequestLine(dst, h.Method(), path, query)
	headers := len(dst)
	dst, versioned, hopByHop := appendClientHeaders(dst, h, false)
	if hopByHop {
		// Rare: the client's Connection header names headers of its own
		// (upstream.ConnectionOptions). They are written again without those.
		dst, versioned, _ = appendClientHeaders(dst[:headers], h, true)
	}
	dst = dep.AppendCredentials(dst, versioned)
	dst = upstream.AppendHeader(dst, headerRequestID, c.reqID)
	if c.trace.On() {
		dst = c.trace.AppendContext(dst)
	}
	return upstream.EndHead(dst, h.Method(), bodyLen)
}

var headerRequestID = []byte("X-Request-Id")

// appendClientHeaders appends the client's headers but the stripped ones,
// and, when dropNamed is set, those its Connection headers name. It reports
// whether the client sent an anthropic-version (an empty one is dropped), and whether its Connection
// header names any headers (see upstream.ConnectionOptions).
func appendClientHeaders(dst []byte, h *fasthttp.RequestHeader, dropNamed bool) (_ []byte, versioned, hopByHop bool) {
	for name, value := range h.All() {
		if strippedRequestHeader(name) {
			hopByHop = hopByHop || string(name) == "Connection" && upstream.ConnectionOptions(value)
			continue
		}
		if dropNamed && namedByConnection(h, name) {
			continue
		}
		if string(name) == "Anthropic-Version" {
			if len(value) == 0 {
				continue // counts as none: the deployment's default goes instead
			}
			versioned = true
		}
		dst = upstream.AppendHeader(dst, name, value)
	}
	return dst, versioned, hopByHop
}

// namedByConnection reports whether one of the client's Connection headers
// names the header name, which is then hop-by-hop.
func namedByConnection(h *fasthttp.RequestHeader, name []byte) bool {
	for conn, list := range h.All() {
		if string(conn) == "Connection" && upstream.NamedIn(list, name) {
			return true
		}
	}
	return false
}

// forwardQuery reports whether the client's query string goes upstream: on
// the Responses reads, exactly as encoded; elsewhere it is the gateway's own
// (such as the ?beta=true the alpha SDK adds) and is dropped.
func (c *call) forwardQuery() bool {
	return c.ep == epResponsesGet || c.ep == epResponsesInputItems
}

// strippedRequestHeaders never reach an upstream: the client's credentials,
// the gateway's own headers, hop-by-hop headers, encodings the gateway would
// have to undo, and the framing and Host, which are the upstream request's
// own.
var strippedRequestHeaders = [][]byte{
	[]byte("Authorization"), []byte("X-Api-Key"), []byte("X-Goog-Api-Key"), []byte("X-Gamma-Api-Key"),
	[]byte("X-Session-Id"), []byte("X-Request-Id"), []byte("Request-Id"),
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("Proxy-Authorization"),
	[]byte("Te"), []byte("Trailer"), []byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Expect"),
	[]byte("Accept-Encoding"), []byte("Cookie"), []byte("Alpha-Workspace-Id"),
	[]byte("Content-Length"), []byte("Host"),
}

// strippedByLen lists the names of strippedRequestHeaders by their length.
var strippedByLen = func() (t [24][][]byte) {
	for _, h := range strippedRequestHeaders {
		t[len(h)] = append(t[len(h)], h)
	}
	return t
}()

// strippedRequestHeader reports whether name is one of
// strippedRequestHeaders, as the server canonicalised it.
func strippedRequestHeader(name []byte) bool {
	if len(name) >= len(strippedByLen) {
		return false
	}
	for _, h := range strippedByLen[len(name)] {
		if string(h) == string(name) {
			return true
		}
	}
	return false
}
