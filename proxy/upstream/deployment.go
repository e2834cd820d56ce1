package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// Deployment is one upstream account of a provider: a pooled connection set,
// its credentials, an atomic health state and an in-flight count. Safe for
// concurrent use. Deployments outlive config reloads when unchanged, so their
// connection pools and health carry over.
type Deployment struct {
	name   string
	family family.Family
	// The upstream URL is the base URL's host + basePath + the endpoint
	// path; basePath is the base URL's path without a trailing slash. TLS is
	// the wire's dialer's (see wire.NewClient).
	host     string // host[:port] of the base URL, lower-cased: the Host header
	basePath string
	// credential is the provider's auth header line (see AppendCredentials).
	credential string
	client     *fasthttp.HostClient
	cfg        config.Upstream

	inflight atomic.Int64
	// ttfb is the time to first byte, decayed (see Route.chooseCheaper).
	ttfb     peakEWMA
	failures atomic.Int32
	// downUntil is the unix-nano time until which the deployment is excluded.
	downUntil atomic.Int64
	// limitedUntil is the end of the last exclusion for a rate limit, which
	// a health probe does not end early (see ExcludeFor).
	limitedUntil atomic.Int64
	// probe is the active health check, nil without one (see StartProbes).
	probe *prober

	maxFailures int32
	cooldown    time.Duration
	// maxAnswer bounds an answer read whole (config limits.max_response_bytes).
	maxAnswer int
	// maxHeld bounds the rest of a streamed answer taken off the connection
	// while the client does not read (config limits.max_held_answer_bytes;
	// -1: never; see readAhead).
	maxHeld int

	// Health changes are logged to log, each kind at most once per logEvery.
	log                      atomic.Pointer[slog.Logger]
	logEvery                 time.Duration
	lastDownLog, lastBackLog throttle

	maxConns int
	// timeouts are the process's timeouts the client was made with; those of
	// the client's side (ClientWriteIdle) are left zero.
	timeouts config.Timeouts

	// Budget bounds the retries of calls that failed on the deployment.
	Budget Budget

	// Stats holds picks, session moves and the deployment's metrics.
	Stats Stats
}

// New makes the deployment u, which must have passed config validation, with
// the process's timeouts t, health settings h and limits l.
func New(u config.Upstream, t config.Timeouts, h config.Health, l config.Limits) *Deployment {
	pu, _ := url.Parse(u.BaseURL) // validated by Config.Validate
	fam, _ := family.Parse(u.Family)
	isTLS := pu.Scheme == "https"
	addr := pu.Host
	if pu.Port() == "" {
		if isTLS {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	d := &Deployment{
		name:        u.Name,
		host:        strings.ToLower(pu.Host),
		family:      fam,
		basePath:    strings.TrimRight(pu.EscapedPath(), "/"),
		credential:  credentialLine(fam, u.APIKey),
		cfg:         u,
		maxFailures: int32(h.Failures),
		cooldown:    h.Cooldown.D(),
		maxAnswer:   l.MaxResponseBytes,
		maxHeld:     l.MaxHeldAnswerBytes,
		logEvery:    LogEvery,
		maxConns:    u.MaxConns,
		timeouts:    upstreamTimeouts(t),
	}
	d.client = wire.NewClient(addr, wire.Options{Connect: t.Connect.D(), FirstByte: t.FirstByte.D(), Idle: t.Idle.D(),
		Write: t.Write.D(), IdleConn: t.IdleConn.D(), MaxConns: u.MaxConns, TLS: tlsConfig(isTLS, pu.Hostname(), u.TLS),
		Observer: (*observer)(d)})
	d.probe = newProber(d, u.HealthCheck, addr, isTLS, pu.Hostname(), u.TLS)
	if !d.loadsItself() {
		d.client.MaxResponseBodySize = d.maxAnswer
	}
	return d
}

// tlsConfig is the TLS configuration of a deployment on host with the
// upstream's tls settings ut, or nil when it is not isTLS. ut's files were
// read at validation; should they no longer load, the deployment trusts no
// server, and its dials fail as dial errors.
func tlsConfig(isTLS bool, host string, ut config.UpstreamTLS) *tls.Config {
	if !isTLS {
		return nil
	}
	c := &tls.Config{}
	if ut != (config.UpstreamTLS{}) {
		var err error
		if c, err = ut.Config(); err != nil {
			c = &tls.Config{RootCAs: x509.NewCertPool()}
		}
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	return c
}

// Same reports whether the deployment can be kept across a reload to u.
func (d *Deployment) Same(u config.Upstream, t config.Timeouts, h config.Health, l config.Limits) bool {
	return d.cfg == u && d.timeouts == upstreamTimeouts(t) && d.maxFailures == int32(h.Failures) &&
		d.cooldown == h.Cooldown.D() && d.maxAnswer == l.MaxResponseBytes &&
		d.maxHeld == l.MaxHeldAnswerBytes
}

// upstreamTimeouts is t without the timeouts of the client's side.
func upstreamTimeouts(t config.Timeouts) config.Timeouts {
	t.ClientWriteIdle = 0
	return t
}

// fasthttpLinearMax is the largest bound at which fasthttp's own read of a
// whole answer costs time linear in its size: above 100 MB it grows its
// buffer by each chunk's size, a copy of the whole answer per chunk.
const fasthttpLinearMax = 96 << 20

// loadsItself reports whether answers read whole are read by Relay.Load
// rather than by fasthttp: when the bound is above fasthttpLinearMax (the
// body is then streamed to Load by the wire's answer body).
func (d *Deployment) loadsItself() bool { return d.maxAnswer > fasthttpLinearMax }

// Name is the deployment's configured name.
func (d *Deployment) Name() string { return d.name }

// Provider is the provider's name in traces (config upstreams[].provider).
func (d *Deployment) Provider() string { return d.cfg.Provider }

// Family is the protocol family the deployment speaks.
func (d *Deployment) Family() family.Family { return d.family }

// InFlight is the number of upstream calls under way.
func (d *Deployment) InFlight() int64 { return d.inflight.Load() }

// SetDecay sets the decay constant of the deployment's time to first byte
// (config routing.decay); 0 is DefaultDecay. Safe to call while the
// deployment serves: a reload that keeps the deployment sets it anew.
func (d *Deployment) SetDecay(tau time.Duration) { d.ttfb.tau.Store(int64(tau)) }

// FirstByteEWMA is the deployment's time to first byte as routing sees it
// now: the peak-EWMA of its answers' heads, decayed; 0 before the first.
func (d *Deployment) FirstByteEWMA() time.Duration { return time.Duration(d.ttfb.value(monoNow())) }

// Addr is the host:port the deployment's connections go to.
func (d *Deployment) Addr() string { return d.client.Addr }

// Conns is the number of open connections to the deployment.
func (d *Deployment) Conns() int { return d.client.ConnsCount() }

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

// observer is a Deployment as its connections tell it what they see (see
// wire.Observer).
type observer Deployment

// HeadRead records, for routing, the time from sent (as the request's write
// began: the write may wait for the answer's first byte) to read, the end of
// the answer's head, whose status is status, or to the first-byte timeout
// that err may be: a deployment whose heads time out is as slow as that. A
// failure's answer (a 5xx, a 429) or any other error is the health's to
// count, not a time: a deployment that fails fast must not look fast. Both
// times are the transport's readings of monoNow's clock.
func (o *observer) HeadRead(sent, read int64, status int, err error) {
	switch {
	case err != nil && !IsTimeout(err), err == nil && (FailureStatus(status) || status == 429):
		return
	}
	o.ttfb.observe(time.Duration(read-sent), read)
}

// IdleClosed counts a pooled connection found closed while idle.
func (o *observer) IdleClosed() { o.Stats.idleClosed.Add(1) }
