package proxy

import (
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/valyala/fasthttp"
)

// Operations endpoints: GET /healthz (the process is alive), GET /readyz (it
// can serve), GET /metrics (Prometheus text format) and GET /status (a page
// for a person). They need no key, are not counted as requests and write no
// access log line: probes and scrapes would drown the real traffic. /metrics
// and /status are served only by AdminHandler, never on the client listener:
// they name deployments and show load. /healthz and /readyz are on both, as
// load balancers probe the serving port and they reveal nothing.

const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
	metricsPath = "/metrics"
	statusPath  = "/status"
)

func (g *Gateway) routeOps(r *router.Router) {
	for _, m := range []string{fasthttp.MethodGet, fasthttp.MethodHead} {
		r.Handle(m, healthzPath, g.healthz)
		r.Handle(m, readyzPath, g.readyz)
	}
}

// AdminHandler serves /metrics, /status, /healthz and /readyz, for an admin
// listener apart from the client-facing one.
func (g *Gateway) AdminHandler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.Error("method not allowed\n", fasthttp.StatusMethodNotAllowed)
			return
		}
		switch string(ctx.Path()) {
		case metricsPath:
			g.metrics(ctx)
		case statusPath, "/":
			g.statusPage(ctx)
		case healthzPath:
			g.healthz(ctx)
		case readyzPath:
			g.readyz(ctx)
		default:
			ctx.Error("not found: the admin listener serves /status, /metrics, /healthz and /readyz\n", fasthttp.StatusNotFound)
		}
	}
}

// NewAdminServer returns a fasthttp server for AdminHandler.
func (g *Gateway) NewAdminServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:              g.AdminHandler(),
		Name:                 "modelgate-admin",
		ReadTimeout:          30 * time.Second,
		WriteTimeout:         30 * time.Second,
		IdleTimeout:          2 * time.Minute,
		MaxRequestBodySize:   1 << 10,
		NoDefaultContentType: true,
		Logger:               slogPrinter{g.log},
	}
}

// Drain makes /readyz answer 503 from now on, so that load balancers stop
// sending new requests while in-flight ones finish (call it on SIGTERM, before
// shutting the servers down).
func (g *Gateway) Drain() { g.obs.draining.Store(true) }

func (g *Gateway) healthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("ok\n")
}

func (g *Gateway) metrics(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	g.WritePrometheus(ctx)
}

// readyz answers 200 when the gateway can serve, else 503, with one line per
// check: the config is loaded, the store is open, and every family that has
// deployments has at least one that is not excluded after failures.
func (g *Gateway) readyz(ctx *fasthttp.RequestCtx) {
	b, ready := g.appendReadiness(ctx.Response.Body()[:0])
	if !ready {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.SetBodyRaw(b)
}

// appendReadiness appends the readiness report to dst; its first line is
// "ready" or "not ready".
func (g *Gateway) appendReadiness(dst []byte) ([]byte, bool) {
	var lines []byte
	ready := true
	check := func(ok bool, what string) {
		ready = ready && ok
		lines = append(lines, what...)
	}
	st := g.state.Load()
	check(st != nil, "config: ")
	if st == nil {
		lines = append(lines, "not loaded\n"...)
	} else {
		lines = append(lines, "ok ("...)
		lines = strconv.AppendInt(lines, int64(len(st.models)), 10)
		lines = append(lines, " models, "...)
		lines = strconv.AppendInt(lines, int64(len(st.deps)), 10)
		lines = append(lines, " deployments)\n"...)
	}
	switch s := g.obs.store; {
	case s == nil:
		check(true, "store: none (the endpoints that need one answer 503)\n")
	case s.closed.Load():
		check(false, "store: closed\n")
	default:
		check(true, "store: open\n")
	}
	if st != nil {
		lines = g.appendFamilyHealth(lines, st, &ready)
	}
	if g.obs.draining.Load() {
		check(false, "draining: shutting down\n")
	}
	if ready {
		dst = append(dst, "ready\n"...)
	} else {
		dst = append(dst, "not ready\n"...)
	}
	return append(dst, lines...), ready
}

// appendFamilyHealth appends, per family with deployments, how many of them
// are healthy; a family with none healthy is not ready.
func (g *Gateway) appendFamilyHealth(dst []byte, st *state, ready *bool) []byte {
	var total, healthy [family.Count]int
	now := time.Now().UnixNano()
	for _, d := range st.deps {
		total[d.Family()]++
		if !d.Excluded(now) {
			healthy[d.Family()]++
		}
	}
	for f := range family.Count {
		if total[f] == 0 {
			continue
		}
		dst = append(dst, f.String()...)
		if healthy[f] == 0 {
			*ready = false
			dst = append(dst, ": failing, "...)
		} else {
			dst = append(dst, ": ok, "...)
		}
		dst = strconv.AppendInt(dst, int64(healthy[f]), 10)
		dst = append(dst, " of "...)
		dst = strconv.AppendInt(dst, int64(total[f]), 10)
		dst = append(dst, " deployments healthy\n"...)
	}
	return dst
}
