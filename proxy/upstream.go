package proxy

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// deployment is one upstream account of a provider: a pooled connection set,
// its credentials, an atomic health state and an in-flight count. Safe for
// concurrent use. Deployments outlive config reloads when unchanged, so their
// connection pools and health carry over.
type deployment struct {
	name   string
	family Family
	// The upstream URL is scheme://host + basePath + the endpoint path;
	// basePath is the base URL's path without a trailing slash.
	scheme   []byte
	host     []byte // host[:port], as the base URL gives it
	basePath string
	apiKey   string
	bearerV  []byte // "Bearer <apiKey>"
	client   *fasthttp.HostClient
	cfg      UpstreamConfig

	inflight atomic.Int64
	failures atomic.Int32
	// downUntil is the unix-nano time until which the deployment is excluded.
	downUntil atomic.Int64

	maxFailures int32
	cooldown    time.Duration

	stats depStats // picks, session moves, latency histograms; see observe.go
}

func newDeployment(u UpstreamConfig, fam Family, t TimeoutConfig, h HealthConfig) *deployment {
	pu, _ := url.Parse(u.BaseURL) // validated by Config.Validate
	isTLS := pu.Scheme == "https"
	addr := pu.Host
	if pu.Port() == "" {
		if isTLS {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	d := &deployment{
		name:        u.Name,
		family:      fam,
		scheme:      []byte(pu.Scheme),
		host:        []byte(pu.Host),
		basePath:    strings.TrimRight(pu.EscapedPath(), "/"),
		apiKey:      u.APIKey,
		bearerV:     []byte("Bearer " + u.APIKey),
		cfg:         u,
		maxFailures: int32(h.Failures),
		cooldown:    h.Cooldown.D(),
	}
	dial := &dialer{connect: t.Connect.D(), firstByte: t.FirstByte.D(), idle: t.Idle.D()}
	d.client = &fasthttp.HostClient{
		Addr:                          addr,
		Name:                          "",
		NoDefaultUserAgentHeader:      true,
		IsTLS:                         isTLS,
		Dial:                          dial.Dial,
		MaxConns:                      u.MaxConns,
		MaxIdleConnDuration:           30 * time.Second,
		MaxIdemponentCallAttempts:     1,
		ReadBufferSize:                8 << 10,
		WriteBufferSize:               8 << 10,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		MaxResponseBodySize:           0,
		MaxConnWaitTimeout:            t.Connect.D(),
	}
	return d
}

// same reports whether the deployment can be kept across a reload to u.
func (d *deployment) same(u UpstreamConfig, t TimeoutConfig, h HealthConfig) bool {
	return d.cfg == u && d.maxFailures == int32(h.Failures) && d.cooldown == h.Cooldown.D()
}

func (d *deployment) bearer() []byte { return d.bearerV }

// excluded reports whether the deployment is in its cooldown after failures.
func (d *deployment) excluded(now int64) bool {
	return d.downUntil.Load() > now
}

// succeeded records an answer that was not an upstream failure.
func (d *deployment) succeeded() {
	if d.failures.Load() != 0 {
		d.failures.Store(0)
	}
	// An exclusion that is over is cleared, so picks stop reading the clock
	// for it; one still running is left alone (the answer may predate it).
	if until := d.downUntil.Load(); until != 0 && until <= time.Now().UnixNano() {
		d.downUntil.CompareAndSwap(until, 0)
	}
}

// failed records a failure; enough in a row exclude the deployment for the
// cooldown. It reports whether this call excluded it.
func (d *deployment) failed() bool {
	if d.failures.Add(1) < d.maxFailures {
		return false
	}
	d.failures.Store(0)
	d.downUntil.Store(time.Now().Add(d.cooldown).UnixNano())
	return true
}

// upstreamFailureStatus reports whether an upstream status counts against the
// deployment's health: server errors and overload, not the caller's mistakes.
func upstreamFailureStatus(status int) bool {
	return status >= 500 && status != 501 && status != 505
}

// dialer makes upstream connections that own their read deadlines: after a
// request is written, the next read may wait up to firstByte; every later read
// up to idle. fasthttp's own read deadline covers a whole streamed body, which
// would cut long streams, so it is ignored.
type dialer struct {
	connect, firstByte, idle time.Duration
}

// errDial marks a failure to connect: nothing reached the upstream, so the call
// may be retried on another deployment.
type errDial struct{ err error }

func (e *errDial) Error() string { return "cannot connect to upstream: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

func (d *dialer) Dial(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, d.connect)
	if err != nil {
		return nil, &errDial{err: err}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &deadlineConn{Conn: c, firstByte: d.firstByte, idle: d.idle}, nil
}

func isDialError(err error) bool {
	var de *errDial
	return errors.As(err, &de) || errors.Is(err, fasthttp.ErrNoFreeConns)
}

type deadlineConn struct {
	net.Conn
	firstByte, idle time.Duration
	awaiting        bool
	// deadline is the read deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of the timeout, so a busy
	// stream does not re-arm a timer on every read.
	deadline time.Time
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.awaiting = true
	return c.Conn.Write(p)
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	d := c.idle
	if c.awaiting {
		d = c.firstByte
	}
	if d > 0 {
		want := time.Now().Add(d)
		if want.Sub(c.deadline) > d>>4 || want.Before(c.deadline) {
			if err := c.Conn.SetReadDeadline(want); err != nil {
				return 0, err
			}
			c.deadline = want
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.awaiting = false
	}
	return n, err
}

// SetReadDeadline is owned by Read; see dialer.
func (c *deadlineConn) SetReadDeadline(time.Time) error { return nil }

// SetDeadline keeps the write half; reads are owned by Read.
func (c *deadlineConn) SetDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(t) }
