package proxy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream"
)

// The status page (GET /status on the admin listener): for a person rather
// than a scraper. Server-rendered HTML, no script: the deployments with their
// health, exclusion, in-flight calls, recent rates and errors; the store; the
// config in force. It never shows a key, a provider secret or a base URL
// (which may carry credentials): deployments are named by their config name.

// statusWindow is the least time between two samples of the counters that
// recent rates are computed from; a page shows the rates since the newest
// sample at least this old, or totals only when there is none yet.
const statusWindow = 10 * time.Second

// statusSampler keeps the deployments' answer counts at recent instants, taken
// when the page is rendered. Safe for concurrent use; the zero value is ready.
type statusSampler struct {
	mu      sync.Mutex
	samples []statusSample // oldest first, at most 8
}

type statusSample struct {
	at     time.Time
	counts map[string][numClasses]uint64 // by deployment name
}

// baseline returns the newest sample at least statusWindow before now (ok
// false when none) and records counts as taken at now.
func (s *statusSampler) baseline(now time.Time, counts map[string][numClasses]uint64) (statusSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var base statusSample
	ok := false
	for _, p := range s.samples {
		if now.Sub(p.at) >= statusWindow {
			base, ok = p, true
		}
	}
	if n := len(s.samples); n == 0 || now.Sub(s.samples[n-1].at) >= statusWindow {
		s.samples = append(s.samples, statusSample{at: now, counts: counts})
		if len(s.samples) > 8 {
			s.samples = slices.Delete(s.samples, 0, 1)
		}
	}
	return base, ok
}

// statusView is what the page template renders.
type statusView struct {
	Now, Version, Store, ConfigID string
	Loaded                        string
	Window                        string // "" when no rates yet
	Models, Keys                  int
	KeySync                       string
	Deployments                   []depView
	Ready                         string
	Budgets                       []budgetView // spend.go
}

type depView struct {
	Name, Family, State, Until string
	InFlight                   int64
	Picks, Moves               uint64
	OK, ClientErr, ServerErr   uint64
	Rate, ErrRate              string // per second over the window, "" without one
	Probe                      string // the last health probe, "" without a health check
}

func (g *Gateway) statusPage(ctx *fasthttp.RequestCtx) {
	v := g.statusView(time.Now())
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("text/html; charset=utf-8")
	if err := statusTemplate.Execute(ctx, v); err != nil {
		g.log.Error("cannot render the status page", "err", err)
	}
}

func (g *Gateway) statusView(now time.Time) *statusView {
	st := g.state.Load()
	r := g.readiness(now)
	ready, _ := json.MarshalIndent(r, "", "  ") // plain fields: it cannot fail
	v := &statusView{
		Now: now.UTC().Format(time.RFC3339), Version: g.opts.Version, Store: g.storeState(&r),
		ConfigID: st.fingerprint, Loaded: st.loaded.UTC().Format(time.RFC3339),
		Models: len(st.models), Keys: g.keys.Load().Len(), Ready: string(ready),
		KeySync: g.keysStatus(), Budgets: g.budgetViews(),
	}
	deps := make([]*upstream.Deployment, 0, len(st.deps))
	counts := make(map[string][numClasses]uint64, len(st.deps))
	for _, d := range st.deps {
		deps = append(deps, d)
		counts[d.Name()] = answerCounts(d)
	}
	slices.SortFunc(deps, func(a, b *upstream.Deployment) int { return cmp.Compare(a.Name(), b.Name()) })
	base, haveBase := g.obs.sampler.baseline(now, counts)
	if haveBase {
		v.Window = now.Sub(base.at).Round(time.Second).String()
	}
	for _, d := range deps {
		v.Deployments = append(v.Deployments, newDepView(d, now, counts[d.Name()], base, haveBase))
	}
	return v
}

func newDepView(d *upstream.Deployment, now time.Time, c [numClasses]uint64, base statusSample, haveBase bool) depView {
	dv := depView{
		Name: d.Name(), Family: d.Family().String(), State: "healthy", InFlight: d.InFlight(),
		Picks: d.Stats.Picks(), Moves: d.Stats.Moves(),
		OK: c[2], ClientErr: c[4], ServerErr: c[5],
	}
	if until := d.ExcludedUntil(now.UnixNano()); !until.IsZero() {
		dv.State, dv.Until = "excluded", until.UTC().Format(time.RFC3339)
	}
	dv.Probe = probeText(d)
	if prev, ok := base.counts[d.Name()]; haveBase && ok {
		secs := now.Sub(base.at).Seconds()
		var all, prevAll uint64
		for i := range c {
			all, prevAll = all+c[i], prevAll+prev[i]
		}
		dv.Rate = perSecond(all-prevAll, secs)
		dv.ErrRate = perSecond(c[5]-prev[5], secs)
	}
	return dv
}

// probeText says how the deployment's last health probe went: "ok" or
// "failed: <cause>" and when, "pending" before the first, "" without a check.
func probeText(d *upstream.Deployment) string {
	if _, _, has := d.Probes(); !has {
		return ""
	}
	p := d.LastProbe()
	switch {
	case p == nil:
		return "pending"
	case p.OK:
		return "ok at " + p.At.UTC().Format(time.RFC3339)
	}
	return "failed (" + p.Cause + ") at " + p.At.UTC().Format(time.RFC3339)
}

// answerCounts reads a deployment's answers by status class.
func answerCounts(d *upstream.Deployment) (c [numClasses]uint64) {
	m := d.Stats.Meter.Load()
	if m == nil {
		return c
	}
	for i := range c {
		if ctr := m.Responses[i].Load(); ctr != nil {
			c[i] = ctr.Get()
		}
	}
	return c
}

func perSecond(n uint64, secs float64) string {
	return strconv.FormatFloat(float64(n)/secs, 'f', 2, 64) + "/s"
}

// storeState is the store's line of the status page, from the readiness
// report r of the same render: one check of the store serves both.
func (g *Gateway) storeState(r *readinessReport) string {
	switch r.Store {
	case "open":
		n, size := g.obs.store.FileStats()
		return "open, " + strconv.FormatInt(n, 10) + " files, " + strconv.FormatInt(size, 10) + " bytes"
	case "unavailable":
		return r.storeReason
	}
	return r.Store
}

// fingerprint names a config by the first 12 hex digits of the SHA-256 of its
// JSON form: two nodes with the same fingerprint route alike. The hash covers
// the secrets without revealing them.
func fingerprint(cfg *config.Config) string {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

var statusTemplate = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>modelgate status</title>
<style>
body{font:15px/1.4 system-ui,sans-serif;margin:24px;color:#1d2430;background:#f6f7f9}
h1{font-size:22px;margin:0 0 4px} .sub{color:#5b6473;margin-bottom:18px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px #0002;margin-bottom:20px}
th,td{padding:7px 12px;text-align:left;border-bottom:1px solid #e4e7ec} th{background:#2b3a55;color:#fff;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.healthy{color:#fff;background:#2e8b57;border-radius:4px;padding:2px 8px}
.excluded{color:#fff;background:#c0392b;border-radius:4px;padding:2px 8px}
pre{background:#fff;padding:10px 14px;box-shadow:0 1px 3px #0002;display:inline-block;margin:0}
</style></head><body>
<h1>modelgate status</h1>
<div class="sub">version {{.Version}} · rendered {{.Now}}</div>
<table id="config"><tr><th colspan="2">Config in force</th></tr>
<tr><td>fingerprint</td><td id="config-id">{{.ConfigID}}</td></tr>
<tr><td>loaded</td><td>{{.Loaded}}</td></tr>
<tr><td>models · keys · deployments</td><td>{{.Models}} · {{.Keys}} · {{len .Deployments}}</td></tr>
<tr><td>keys</td><td>{{.KeySync}}</td></tr>
<tr><td>store</td><td id="store">{{.Store}}</td></tr></table>
<table id="deployments"><tr><th>deployment</th><th>family</th><th>health</th><th>in flight</th><th>picks</th><th>session moves</th>
<th>2xx</th><th>4xx</th><th>5xx</th><th>rate{{if .Window}} ({{.Window}}){{end}}</th><th>5xx rate</th><th>health probe</th></tr>
{{range .Deployments}}<tr class="dep" data-name="{{.Name}}" data-state="{{.State}}"><td>{{.Name}}</td><td>{{.Family}}</td>
<td><span class="{{.State}}">{{.State}}</span>{{if .Until}} until {{.Until}}{{end}}</td>
<td class="num">{{.InFlight}}</td><td class="num">{{.Picks}}</td><td class="num">{{.Moves}}</td>
<td class="num">{{.OK}}</td><td class="num">{{.ClientErr}}</td><td class="num">{{.ServerErr}}</td>
<td class="num">{{if .Rate}}{{.Rate}}{{else}}–{{end}}</td><td class="num">{{if .ErrRate}}{{.ErrRate}}{{else}}–{{end}}</td>
<td class="probe">{{if .Probe}}{{.Probe}}{{else}}–{{end}}</td></tr>
{{end}}</table>
{{if .Budgets}}<table id="budgets"><tr><th>budget</th><th>period</th><th>since</th><th>limit USD</th><th>spent USD</th><th>reserved USD</th><th>remaining USD</th><th>refused</th></tr>
{{range .Budgets}}<tr class="budget"><td>{{if .Key}}key {{.Key}}{{else}}{{.Budget}}{{end}}</td><td>{{.Period}}</td><td>{{.PeriodStart}}</td>
<td class="num">{{.Limit}}</td><td class="num">{{.Spent}}</td><td class="num">{{.Reserved}}</td><td class="num">{{.Remaining}}</td><td class="num">{{.Refused}}</td></tr>
{{end}}</table>{{end}}
<h2 style="font-size:17px">Readiness</h2>
<pre id="ready">{{.Ready}}</pre>
</body></html>
`))
