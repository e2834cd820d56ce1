package load

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// ErrNotLoopback is returned for a target whose host is not a loopback IP literal.
var ErrNotLoopback = errors.New("load: target host is not a loopback address (127.0.0.0/8 or ::1)")

// DefaultMaxBody bounds the body bytes read from one response when Check.MaxBody is zero.
const DefaultMaxBody = 64 << 20

// Header is one request header field.
type Header struct {
	Name, Value string
}

// Spec describes the request a run sends, again and again.
//
// URL is required. A Spec is read, never written, by a run: one Spec may
// serve many runs at once.
type Spec struct {
	// Method is the request method; empty means GET, or POST when Body is set.
	Method string
	// URL is the absolute http:// or https:// URL; its host must be a
	// loopback IP literal. An https URL needs TLS.
	URL string
	// TLS is the client configuration of an https URL: the roots that
	// verify the target's certificate, the server name. Its session cache,
	// when nil, makes every new connection a full handshake.
	TLS *tls.Config
	// CloseEach asks the target to close the connection after each answer
	// (Connection: close), so that every call opens a new connection: over
	// TLS, a handshake per call.
	CloseEach bool
	// Headers are set on every request, in order.
	Headers []Header
	// Body is sent as is; it is copied once per connection, not per request.
	Body []byte
	// Mutate, when set, edits the request before each send, e.g. to set a
	// session id from a pool. seq counts the requests of the run from 0. It is
	// called from many goroutines at once, each with its own request, so it
	// must not write shared state. Edits persist to the next send of that
	// request, so it should set every field it touches.
	Mutate func(req *fasthttp.Request, seq uint64)
	// Check says what a successful response looks like.
	Check Check
	// GroupBy, when set, names an answer header (e.g. the deployment that
	// answered) by whose value the successful calls are also counted, with
	// their time to first byte: Result.Groups.
	GroupBy string
}

// Check says what a successful response looks like and how it is read.
//
// The zero value expects status 200 and reads the body buffered.
type Check struct {
	// Status is the expected status code; 0 means 200.
	Status int
	// Stream reads the body through fasthttp's StreamResponseBody, so the time
	// to first byte is the time the first body bytes arrive. Buffered bodies
	// report their total time as time to first byte.
	Stream bool
	// SSE counts server-sent events in the body; it implies Stream.
	SSE bool
	// Events, when positive, is the exact number of events an SSE body must
	// carry; a stream cut short fails the check.
	Events int
	// MaxBody bounds the body bytes read from one response; 0 means DefaultMaxBody.
	MaxBody int
}

func (c *Check) streams() bool { return c.Stream || c.SSE }

func (c *Check) status() int {
	if c.Status == 0 {
		return fasthttp.StatusOK
	}
	return c.Status
}

func (c *Check) maxBody() int {
	if c.MaxBody <= 0 {
		return DefaultMaxBody
	}
	return c.MaxBody
}

// hostAddr validates rawURL and returns the host:port to dial.
func hostAddr(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("cannot parse target URL %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("cannot use target URL %q: scheme must be http or https", rawURL)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("cannot use target URL %q: %w", rawURL, ErrNotLoopback)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// ErrNoTLSConfig is returned for an https target of a Spec without TLS.
var ErrNoTLSConfig = errors.New("load: an https target needs Spec.TLS")

// isTLS reports whether s speaks TLS to its target, and refuses an https
// URL without a client configuration.
func (s *Spec) isTLS() (bool, error) {
	if !strings.HasPrefix(s.URL, "https://") {
		return false, nil
	}
	if s.TLS == nil {
		return true, fmt.Errorf("cannot use target URL %q: %w", s.URL, ErrNoTLSConfig)
	}
	return true, nil
}

// CheckLoopback reports whether addr ("host:port" or an http URL) names a
// loopback IP literal; it returns an error wrapping ErrNotLoopback if not.
func CheckLoopback(addr string) error {
	if strings.Contains(addr, "://") {
		_, err := hostAddr(addr)
		return err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cannot use address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("cannot use address %q: %w", addr, ErrNotLoopback)
	}
	return nil
}

// BuildRequest fills req from s (URL, method, headers, body), as a worker
// does once before reusing req for every send; Mutate is not applied.
func (s *Spec) BuildRequest(req *fasthttp.Request) {
	req.SetRequestURI(s.URL)
	method := s.Method
	if method == "" {
		method = fasthttp.MethodGet
		if len(s.Body) > 0 {
			method = fasthttp.MethodPost
		}
	}
	req.Header.SetMethod(method)
	for _, h := range s.Headers {
		req.Header.Set(h.Name, h.Value)
	}
	if len(s.Body) > 0 {
		req.SetBody(s.Body)
	}
	if s.CloseEach {
		req.SetConnectionClose()
	}
}

// SessionPool is a fixed set of session ids, e.g. 10,000 of them, from which
// requests take an id by their sequence number.
//
// A SessionPool is immutable after NewSessionPool and safe for concurrent use.
type SessionPool struct {
	ids [][]byte
}

// NewSessionPool returns a pool of n ids: prefix followed by 0..n-1.
func NewSessionPool(n int, prefix string) *SessionPool {
	if n <= 0 {
		panic("BUG: session pool size must be positive")
	}
	p := &SessionPool{ids: make([][]byte, n)}
	for i := range p.ids {
		p.ids[i] = strconv.AppendInt([]byte(prefix), int64(i), 10)
	}
	return p
}

// Len returns the number of ids in the pool.
func (p *SessionPool) Len() int { return len(p.ids) }

// ID returns the id for request seq; the caller must not modify it.
func (p *SessionPool) ID(seq uint64) []byte { return p.ids[seq%uint64(len(p.ids))] }

// HeaderMutator returns a Spec.Mutate that sets header name to the request's id.
func (p *SessionPool) HeaderMutator(name string) func(*fasthttp.Request, uint64) {
	return func(req *fasthttp.Request, seq uint64) {
		req.Header.SetBytesV(name, p.ID(seq))
	}
}

// BodyMutator returns a Spec.Mutate that sends template with its first
// placeholder replaced by the request's id. The bodies are built once, here.
func (p *SessionPool) BodyMutator(template, placeholder []byte) (func(*fasthttp.Request, uint64), error) {
	i := bytes.Index(template, placeholder)
	if i < 0 || len(placeholder) == 0 {
		return nil, fmt.Errorf("cannot build session bodies: placeholder %q not in template", placeholder)
	}
	bodies := make([][]byte, len(p.ids))
	for j, id := range p.ids {
		b := make([]byte, 0, len(template)-len(placeholder)+len(id))
		b = append(b, template[:i]...)
		b = append(b, id...)
		bodies[j] = append(b, template[i+len(placeholder):]...)
	}
	return func(req *fasthttp.Request, seq uint64) {
		req.SetBodyRaw(bodies[seq%uint64(len(bodies))])
	}, nil
}
