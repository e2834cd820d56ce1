package upstream

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
)

// prober is a deployment's active health check (config
// upstreams[].health_check): one goroutine that GETs the check's path with
// the deployment's credentials every interval, on a client of its own (one
// connection, bounded by the check's timeout), so that a probe neither waits
// behind the calls nor counts in their in-flight load.
type prober struct {
	hc     config.HealthCheck
	client *fasthttp.HostClient
	uri    string // http(s)://host/basePath/path

	once sync.Once
	stop chan struct{}
	done chan struct{}

	ok, failed atomic.Uint64 // probes by result
	inARow     atomic.Int32  // failed probes in a row
	last       atomic.Pointer[ProbeResult]
}

// ProbeResult is the outcome of a deployment's last health probe.
type ProbeResult struct {
	At    time.Time
	OK    bool
	Cause string // why it failed: a status, "timeout" or a fixed word (see causeText)
}

// newProber makes d's prober for hc, or nil when hc has no path; addr,
// isTLS and host (for TLS) are those of d's base URL, ut its TLS settings:
// a probe checks the certificate as d's calls do.
func newProber(d *Deployment, hc config.HealthCheck, addr string, isTLS bool, host string, ut config.UpstreamTLS) *prober {
	if hc.Path == "" {
		return nil
	}
	scheme := "http://"
	if isTLS {
		scheme = "https://"
	}
	return &prober{
		hc: hc,
		client: &fasthttp.HostClient{
			Addr: addr, IsTLS: isTLS, TLSConfig: tlsConfig(isTLS, host, ut),
			MaxConns: 1, ReadTimeout: hc.Timeout.D(), WriteTimeout: hc.Timeout.D(),
			MaxIdleConnDuration: 2 * hc.Interval.D(), NoDefaultUserAgentHeader: true,
			SecureErrorLogMessage: true,
		},
		uri:  scheme + d.host + d.basePath + hc.Path,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// StartProbes starts the deployment's health probes, when it has a health
// check; calling it again does nothing. StopProbes ends them.
func (d *Deployment) StartProbes() {
	p := d.probe
	if p == nil {
		return
	}
	p.once.Do(func() { go d.probeLoop(p) })
}

// StopProbes ends the deployment's health probes, waits for the one under
// way, if any, and closes the probes' connection; safe to call more than
// once (not at once), and without StartProbes.
func (d *Deployment) StopProbes() {
	p := d.probe
	if p == nil {
		return
	}
	started := true
	p.once.Do(func() { started = false })
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	if started {
		<-p.done
	}
	p.client.CloseIdleConnections()
}

func (d *Deployment) probeLoop(p *prober) {
	defer close(p.done)
	t := time.NewTicker(p.hc.Interval.D())
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			d.probeOnce(p)
		}
	}
}

// probeOnce probes the deployment and acts on the result: a success ends an
// exclusion at once; Failures failures in a row exclude the deployment for
// its cooldown, or at least until the next probe, so that it stays out while
// its probes fail.
func (d *Deployment) probeOnce(p *prober) {
	err := d.probeCall(p)
	res := &ProbeResult{At: time.Now(), OK: err == nil}
	if err != nil {
		res.Cause = causeText(err)
	}
	p.last.Store(res)
	if err == nil {
		p.ok.Add(1)
		p.inARow.Store(0)
		d.probeSucceeded()
		return
	}
	p.failed.Add(1)
	if p.inARow.Add(1) < int32(p.hc.Failures) {
		return
	}
	now := time.Now()
	excluded := !d.Excluded(now.UnixNano())
	raise(&d.downUntil, now.Add(max(d.cooldown, p.hc.Interval.D()+p.hc.Timeout.D())).UnixNano())
	if excluded {
		d.logHealth(&d.lastDownLog, "deployment excluded after failed health probes", err, "probes_failed", p.inARow.Load())
	}
}

// probeSucceeded ends the deployment's exclusion, if any, and clears its
// failures in a row; an exclusion for a rate limit (ExcludeFor) runs to the
// time the provider gave.
func (d *Deployment) probeSucceeded() {
	d.failures.Store(0)
	for {
		now := time.Now().UnixNano()
		until, limited := d.downUntil.Load(), d.limitedUntil.Load()
		if limited <= now {
			limited = 0
		}
		if until <= limited {
			return
		}
		if d.downUntil.CompareAndSwap(until, limited) {
			if until > now {
				d.logHealth(&d.lastBackLog, "deployment back in service: its health probe succeeded", nil)
			}
			return
		}
	}
}

// probeCall makes one probe: nil for a 2xx answer within the timeout, else a
// StatusError or the transport's error.
func (d *Deployment) probeCall(p *prober) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(p.uri)
	name, value, _ := strings.Cut(strings.TrimSuffix(d.credential, "\r\n"), ": ")
	req.Header.Set(name, value)
	if d.family == family.Alpha {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	if err := p.client.DoTimeout(req, resp, p.hc.Timeout.D()); err != nil {
		return err
	}
	if s := resp.StatusCode(); s < 200 || s > 299 {
		return StatusError(s)
	}
	return nil
}

// LastProbe returns the outcome of the deployment's last health probe, or
// nil when it has no health check or has not been probed yet.
func (d *Deployment) LastProbe() *ProbeResult {
	if d.probe == nil {
		return nil
	}
	return d.probe.last.Load()
}

// Probes returns how many of the deployment's health probes succeeded and
// failed; hasCheck is false when it has no health check.
func (d *Deployment) Probes() (ok, failed uint64, hasCheck bool) {
	if d.probe == nil {
		return 0, 0, false
	}
	return d.probe.ok.Load(), d.probe.failed.Load(), true
}
