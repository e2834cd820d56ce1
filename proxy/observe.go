package proxy

import (
	"bytes"
	"cmp"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/promtext"
	"github.com/modelgate/gateway/proxy/trace"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Metrics and the access log (issue 7). Every call ends in finish exactly once;
// finish counts it and, when an access log is set, writes its line. Counters
// are found without locks and without allocating: per model (held by *model)
// an array indexed by family, endpoint and status class; per deployment (held
// by *upstream.Deployment) its histograms. Each is created in the gateway's own
// metrics.Set on first use. See docs/operations.md for every metric.

// Status classes label requests: "1xx".."5xx", and "other" for a status that
// is not one (a call that ended before any was set).
const numClasses = 6

var classNames = [numClasses]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

func statusClass(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// observer holds a gateway's metrics and access log. Safe for concurrent use.
type observer struct {
	set    *metrics.Set
	access *accesslog.Log
	// noModel counts the calls that resolved no configured model.
	noModel  modelStats
	bytesIn  [family.Count]*metrics.Counter
	bytesOut [family.Count]*metrics.Counter
	streams  *metrics.Gauge
	reasons  [family.Count]reasonCounters
	hists    histograms
	sampler  statusSampler
	// store is the instrumented store, nil without one.
	store    *observedStore
	draining atomic.Bool
	// acceptErrs counts the failed accepts of each listener; refused the
	// client connections closed to keep descriptors (see listeners.go).
	acceptErrs [numListeners]*metrics.Counter
	refused    *metrics.Counter
	// traceCounters count the spans that did not reach the collector.
	traceCounters trace.Counters
}

// observe sets up the gateway's metrics and access log and instruments its
// store. New calls it before the first Reload.
func (g *Gateway) observe() {
	o := &observer{set: metrics.NewSet(), access: g.opts.AccessLog}
	for f := range family.Count {
		o.bytesIn[f] = o.set.NewCounter(`gateway_request_bytes_total{family="` + f.String() + `"}`)
		o.bytesOut[f] = o.set.NewCounter(`gateway_response_bytes_total{family="` + f.String() + `"}`)
	}
	o.streams = o.set.NewGauge("gateway_active_streams", nil)
	o.observeListeners()
	o.traceCounters = trace.Counters{Log: g.log, Dropped: o.set.NewCounter("gateway_trace_spans_dropped_total"),
		Failed: o.set.NewCounter("gateway_trace_spans_failed_total")}
	if g.opts.Store != nil {
		o.store = newObservedStore(g.opts.Store, o.set, &o.hists)
		g.opts.Store = o.store
	}
	o.set.RegisterMetricsWriter(g.writeStateMetrics)
	o.set.RegisterMetricsWriter(g.limits.WritePrometheus)
	if g.opts.Metrics != nil {
		o.set.RegisterMetricsWriter(g.opts.Metrics)
	}
	// # HELP and # TYPE lines before each metric family, for scrapers that
	// read them (types in Grafana's metric browser, promtool check metrics).
	metrics.ExposeMetadata(true)
	o.set.RegisterMetricsWriter(o.hists.write)
	g.obs = o
}

// modelStats counts the requests of one model. The zero value is ready; safe
// for concurrent use. Each counter is created on first use.
type modelStats struct {
	requests [family.Count][numEndpoints][numClasses]atomic.Pointer[metrics.Counter]
}

func (o *observer) requests(ms *modelStats, modelID string, fam family.Family, ep endpoint, class int) *metrics.Counter {
	p := &ms.requests[fam][ep][class]
	if c := p.Load(); c != nil {
		return c
	}
	name := make([]byte, 0, 128)
	name = append(name, `gateway_requests_total{family="`...)
	name = append(name, fam.String()...)
	name = append(name, `",endpoint="`...)
	name = append(name, ep.String()...)
	name = append(name, `",model=`...)
	name = promtext.AppendLabelValue(name, modelID)
	name = append(name, `,status="`...)
	name = append(name, classNames[class]...)
	name = append(name, `"}`...)
	c := o.set.GetOrCreateCounter(string(name))
	p.Store(c)
	return c
}

// reasonCounters counts the rejections of one family by reason. Reasons are
// the gateway's own labels, a small fixed set, so the map only grows while
// new ones are first seen; lookups read an immutable map without locking.
type reasonCounters struct {
	m  atomic.Pointer[map[string]*metrics.Counter]
	mu sync.Mutex
}

func (o *observer) rejection(fam family.Family, reason string) *metrics.Counter {
	rc := &o.reasons[fam]
	if m := rc.m.Load(); m != nil {
		if c := (*m)[reason]; c != nil {
			return c
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	old := rc.m.Load()
	if old != nil && (*old)[reason] != nil {
		return (*old)[reason]
	}
	next := make(map[string]*metrics.Counter, 8)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	name := `gateway_rejections_total{family="` + fam.String() + `",reason=` + string(promtext.AppendLabelValue(nil, reason)) + `}`
	c := o.set.GetOrCreateCounter(name)
	next[reason] = c
	rc.m.Store(&next)
	return c
}

// depMetrics returns the deployment's metrics, made on first use.
func (o *observer) depMetrics(d *upstream.Deployment) *upstream.Meter {
	if m := d.Stats.Meter.Load(); m != nil {
		return m
	}
	label := `deployment=` + string(promtext.AppendLabelValue(nil, d.Name()))
	m := &upstream.Meter{
		Duration:  o.hists.get("gateway_upstream_duration_seconds", label),
		FirstByte: o.hists.get("gateway_upstream_first_byte_seconds", label),
	}
	if !d.Stats.Meter.CompareAndSwap(nil, m) {
		return d.Stats.Meter.Load()
	}
	return m
}

func (o *observer) upstreamResponses(d *upstream.Deployment, m *upstream.Meter, class int) *metrics.Counter {
	p := &m.Responses[class]
	if c := p.Load(); c != nil {
		return c
	}
	name := `gateway_upstream_responses_total{deployment=` + string(promtext.AppendLabelValue(nil, d.Name())) +
		`,status="` + classNames[class] + `"}`
	c := o.set.GetOrCreateCounter(name)
	p.Store(c)
	return c
}

// streamStarted is called by relay when an answer starts to stream to the
// client; finish ends what it starts.
func (g *Gateway) streamStarted(c *call) {
	if c.up.SSE() {
		g.obs.streams.Inc()
	}
}

// finish counts a call that has been answered and writes its access log line.
// It runs exactly once per call: at the end of the handler, or when fasthttp
// closes a streamed answer. With the access log off it does not allocate once
// the call's counters exist.
func (g *Gateway) finish(c *call) {
	c.noteClientGone()
	g.settleLimits(c)
	g.settleSpend(c) // the key's money budgets: spend.go
	o := g.obs
	now := c.clock()
	status, bytesIn, bytesOut := c.outcome()
	class := statusClass(status)
	ms, modelID := &o.noModel, ""
	if c.model != nil {
		ms, modelID = &c.model.stats, c.model.id
	}
	o.requests(ms, modelID, c.family, c.ep, class).Inc()
	o.bytesIn[c.family].AddInt64(bytesIn)
	o.bytesOut[c.family].AddInt64(bytesOut)
	if c.reason != "" {
		o.rejection(c.family, c.reason).Inc()
	}
	if c.up.SSE() && c.up.Streaming() {
		o.streams.Dec()
	}
	if d := c.dep; d != nil {
		m := o.depMetrics(d)
		m.Duration.Observe(now.Sub(c.start))
		if fb := c.firstByteAt(); !fb.IsZero() {
			m.FirstByte.Observe(fb.Sub(c.start))
		}
		o.upstreamResponses(d, m, class).Inc()
	}
	if u := c.up.Usage(); u.Found && c.model != nil {
		o.countTokens(&c.model.tokens, c.model.id, c.keyID, &u)
	}
	if o.access != nil {
		o.logAccess(c, status, now, bytesIn, bytesOut)
	}
	c.traceEnd(status, now)
}

// outcome returns the status answered and the body bytes received and sent.
// A call answered within its handler reads them from its response, which also
// covers answers the gateway wrote itself; a streamed one from the relay.
func (c *call) outcome() (status int, bytesIn, bytesOut int64) {
	status, bytesIn, bytesOut = c.status, int64(len(c.body)), c.bytesOut
	if c.up.Streaming() {
		return status, int64(c.bodyLen), c.up.Sent()
	}
	if c.ctx == nil {
		return status, bytesIn, bytesOut
	}
	resp := &c.ctx.Response
	if status == 0 {
		status = resp.StatusCode()
	}
	if !resp.IsBodyStream() {
		bytesOut = int64(len(resp.Body()))
	}
	// An upload streamed into the store is not held in c.body.
	bytesIn = max(bytesIn, int64(c.ctx.Request.Header.ContentLength()))
	return status, bytesIn, bytesOut
}

// firstByteAt is when the first answer byte was ready for the client, or the
// zero time: for a streamed answer, when the relay first read from upstream.
func (c *call) firstByteAt() time.Time {
	if c.up.Streaming() {
		return c.up.FirstByte()
	}
	return c.firstByte
}

// maxLoggedModel bounds the client-sent model name written to the access log.
const maxLoggedModel = 256

// accessScratch holds the bytes of an access line's values made from hex;
// pooled. The strings made from them are valid until the scratch goes back
// to the pool, after the line is written.
type accessScratch struct {
	hex     [16]byte
	traceID [32]byte
}

var accessScratchPool = sync.Pool{New: func() any { return new(accessScratch) }}

// logAccess writes the call's access log line: who, what, where it went, how
// it ended and how long it took. Never a body, a key or a provider secret:
// the caller is named by its key id, the session by a hash of its key.
func (o *observer) logAccess(c *call, status int, now time.Time, bytesIn, bytesOut int64) {
	ln := o.access.Begin("request")
	if ln == nil {
		return
	}
	sc := accessScratchPool.Get().(*accessScratch)
	// c.reqID is not changed before the call is released, after this line.
	ln.String("request_id", b2s(c.reqID))
	ln.String("key_id", c.keyID)
	ln.String("family", c.family.String())
	ln.String("endpoint", c.ep.String())
	ln.String("model", loggedModel(c))
	ln.String("deployment", deploymentName(c.dep))
	ln.Int("status", int64(status))
	ln.Duration("latency", now.Sub(c.start))
	ln.Int("bytes_in", bytesIn)
	ln.Int("bytes_out", bytesOut)
	ln.Bool("stream", c.up.SSE())
	if fb := c.firstByteAt(); !fb.IsZero() {
		ln.Duration("ttfb", fb.Sub(c.start))
	}
	if c.hasSession {
		ln.String("session", b2s(appendSessionHash(sc.hex[:0], c.sessionHash)))
	}
	if c.attempts > 1 || c.up.StaleRetries > 0 {
		ln.Int("attempts", int64(c.attempts))
		ln.Int("stale_retries", int64(c.up.StaleRetries))
	}
	addUsageAttrs(ln, c.up.Usage())
	addSpendAttrs(ln, c)
	if c.reason != "" {
		ln.String("reason", c.reason)
	}
	if c.cause != nil {
		ln.String("error", c.cause.Error())
	}
	if c.trace.On() {
		ln.String("trace_id", b2s(c.appendTraceID(sc.traceID[:0])))
	}
	ln.End()
	accessScratchPool.Put(sc)
}

// loggedModel is the configured model the call resolved, else the name the
// client asked for (cut to maxLoggedModel bytes), else "".
func loggedModel(c *call) string {
	if c.model != nil {
		return c.model.id
	}
	m := c.fields.Model
	if len(m) > maxLoggedModel {
		m = m[:maxLoggedModel]
	}
	return string(m)
}

func deploymentName(d *upstream.Deployment) string {
	if d == nil {
		return ""
	}
	return d.Name()
}

// appendSessionHash appends the session key's affinity hash as 16 hex digits.
func appendSessionHash(dst []byte, h uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(h>>shift)&0xf])
	}
	return dst
}

// WritePrometheus writes the gateway's metrics in the Prometheus text format,
// followed by the Go runtime and process metrics; every family with its
// # HELP text (see metricHelp).
func (g *Gateway) WritePrometheus(w io.Writer) {
	var b bytes.Buffer
	g.obs.set.WritePrometheus(&b)
	metrics.WriteProcessMetrics(&b)
	w.Write(appendHelpFilled(make([]byte, 0, b.Len()+8<<10), b.Bytes()))
}

// writeStateMetrics writes what is read at scrape time rather than counted:
// the health, load, picks and session moves of the deployments of the config
// in force, and the files stored. Each metric's lines are written together.
func (g *Gateway) writeStateMetrics(w io.Writer) {
	st := g.state.Load()
	deps := make([]*upstream.Deployment, 0, len(st.deps))
	for _, d := range st.deps {
		deps = append(deps, d)
	}
	slices.SortFunc(deps, func(a, b *upstream.Deployment) int { return cmp.Compare(a.Name(), b.Name()) })
	now := time.Now().UnixNano()
	b := make([]byte, 0, 512*len(deps)+256)
	b = promtext.AppendMetadata(b, "gateway_deployment_excluded", "gauge", "1 while the deployment is excluded after failures in a row")
	for _, d := range deps {
		excluded := int64(0)
		if d.Excluded(now) {
			excluded = 1
		}
		b = appendSample(b, "gateway_deployment_excluded", d, `,family="`+d.Family().String()+`"`, excluded)
	}
	b = promtext.AppendMetadata(b, "gateway_upstream_in_flight", "gauge", "requests in flight to the deployment")
	for _, d := range deps {
		b = appendSample(b, "gateway_upstream_in_flight", d, "", d.InFlight())
	}
	b = promtext.AppendMetadata(b, "gateway_affinity_picks_total", "counter", "times the deployment was picked for a request")
	for _, d := range deps {
		b = appendSample(b, "gateway_affinity_picks_total", d, "", int64(d.Stats.Picks()))
	}
	b = promtext.AppendMetadata(b, "gateway_affinity_session_moves_total", "counter", "session picks that went to this deployment rather than the ring's first choice: excluded, failed, or at its bound of calls in flight (a heavy session's limit is lower), or the session staying where it moved")
	for _, d := range deps {
		b = appendSample(b, "gateway_affinity_session_moves_total", d, "", int64(d.Stats.Moves()))
	}
	b = appendRetryMetrics(b, deps)
	b = appendProbeMetrics(b, deps)
	if s := g.obs.store; s != nil {
		count, size := s.FileStats()
		b = promtext.AppendMetadata(b, "gateway_files_stored", "gauge", "user-data files in the store")
		b = append(b, "gateway_files_stored "...)
		b = strconv.AppendInt(b, count, 10)
		b = append(b, '\n')
		b = promtext.AppendMetadata(b, "gateway_files_stored_bytes", "gauge", "bytes of the user-data files in the store")
		b = append(b, "gateway_files_stored_bytes "...)
		b = strconv.AppendInt(b, size, 10)
		b = append(b, '\n')
		b = appendOrphanMetric(b, s.s)
	}
	w.Write(b)
}

// appendRetryMetrics appends the deployments' upstream attempts, retries by
// reason, idle connections found closed and retries refused by the budget.
func appendRetryMetrics(b []byte, deps []*upstream.Deployment) []byte {
	b = promtext.AppendMetadata(b, "gateway_upstream_attempts_total", "counter", "upstream requests sent, retries and resends included, per deployment")
	for _, d := range deps {
		b = appendSample(b, "gateway_upstream_attempts_total", d, "", int64(d.Stats.Attempts()))
	}
	b = promtext.AppendMetadata(b, "gateway_upstream_retries_total", "counter", "calls sent again after a failure before the first answer byte, per deployment and reason")
	for _, d := range deps {
		for r := upstream.RetryReason(1); r < upstream.NumRetryReasons; r++ {
			if n := d.Stats.Retries(r); n > 0 {
				b = appendSample(b, "gateway_upstream_retries_total", d, `,reason="`+r.String()+`"`, int64(n))
			}
		}
	}
	b = promtext.AppendMetadata(b, "gateway_upstream_idle_closed_total", "counter", "pooled connections found closed by the upstream while idle, before a request was written on them: replaced, the call not sent again")
	for _, d := range deps {
		b = appendSample(b, "gateway_upstream_idle_closed_total", d, "", int64(d.Stats.IdleClosed()))
	}
	b = promtext.AppendMetadata(b, "gateway_upstream_retry_budget_exhausted_total", "counter", "retries refused because the deployment's retry budget was spent")
	for _, d := range deps {
		b = appendSample(b, "gateway_upstream_retry_budget_exhausted_total", d, "", int64(d.Stats.BudgetExhausted()))
	}
	return b
}

// appendProbeMetrics appends the health probes of the deployments that have
// a health check, by result, and each deployment's time to first byte as
// routing sees it (see upstream.Route).
func appendProbeMetrics(b []byte, deps []*upstream.Deployment) []byte {
	b = promtext.AppendMetadata(b, "gateway_upstream_probes_total", "counter", "active health probes of the deployment, by result (ok, failed)")
	for _, d := range deps {
		if ok, failed, has := d.Probes(); has {
			b = appendSample(b, "gateway_upstream_probes_total", d, `,result="ok"`, int64(ok))
			b = appendSample(b, "gateway_upstream_probes_total", d, `,result="failed"`, int64(failed))
		}
	}
	b = promtext.AppendMetadata(b, "gateway_upstream_first_byte_ewma_seconds", "gauge", "the deployment's peak-EWMA time to first byte that sessionless calls are spread by; 0 before its first answer")
	for _, d := range deps {
		b = appendSampleFloat(b, "gateway_upstream_first_byte_ewma_seconds", d, d.FirstByteEWMA().Seconds())
	}
	return b
}

// appendSampleFloat appends `name{deployment="<d.name>"} v`.
func appendSampleFloat(b []byte, name string, d *upstream.Deployment, v float64) []byte {
	b = append(b, name...)
	b = append(b, `{deployment=`...)
	b = promtext.AppendLabelValue(b, d.Name())
	b = append(b, "} "...)
	b = strconv.AppendFloat(b, v, 'g', 6, 64)
	return append(b, '\n')
}

// appendSample appends `name{deployment="<d.name>"<more>} v`.
func appendSample(b []byte, name string, d *upstream.Deployment, more string, v int64) []byte {
	b = append(b, name...)
	b = append(b, `{deployment=`...)
	b = promtext.AppendLabelValue(b, d.Name())
	b = append(b, more...)
	b = append(b, "} "...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}
