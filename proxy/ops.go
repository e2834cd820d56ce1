package proxy

import (
	"encoding/json"
	"time"

	"github.com/fasthttp/router"
	"github.com/modelgate/gateway/proxy/admin"
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

// AdminHandler serves /metrics, /status, /healthz, /readyz and the keys' API
// (/admin/v1/keys, see callerkeys.go), for an admin listener apart from the
// client-facing one.
func (g *Gateway) AdminHandler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if admin.Owns(ctx.Path()) {
			g.admin.Serve(ctx)
			return
		}
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.Error("method not allowed\n", fasthttp.StatusMethodNotAllowed)
			return
		}
		switch string(ctx.Path()) {
		case metricsPath:
			if g.adminAllowed(ctx) {
				g.metrics(ctx)
			}
		case statusPath, "/":
			if g.adminAllowed(ctx) {
				g.statusPage(ctx)
			}
		case budgetsPath: // spend.go
			g.serveBudgets(ctx)
		case healthzPath:
			g.healthz(ctx)
		case readyzPath:
			g.readyz(ctx)
		default:
			ctx.Error("not found: the admin listener serves /status, /metrics, /healthz, /readyz, /admin/v1/keys and /admin/v1/budgets\n", fasthttp.StatusNotFound)
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
		MaxRequestBodySize:   2 * admin.MaxBody, // a larger body of the keys' API is answered 413 by it
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

// readyz answers 200 when this node can serve, else 503, with a JSON report:
// the config is loaded, the store is usable, the node is not draining, and at
// least one family has a deployment that is not excluded after failures. A
// family with none healthy is shown as failing but does not make the node
// unready: another family still works here, and pulling every node from a
// load balancer would not bring that family back. The object storage of the file
// bytes is reported alike, without making the node unready (ops_bucket.go).
func (g *Gateway) readyz(ctx *fasthttp.RequestCtx) {
	r := g.readiness(time.Now())
	if !r.Ready {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("application/json")
	b, _ := json.Marshal(r) // plain fields: it cannot fail
	ctx.Response.SetBodyRaw(append(b, '\n'))
}

// readinessReport is the body of /readyz.
type readinessReport struct {
	Ready    bool                    `json:"ready"`
	Reasons  []string                `json:"reasons,omitempty"` // why not ready
	Config   *configReport           `json:"config"`            // null: not loaded
	Store    string                  `json:"store"`             // open, unavailable, closed or none
	Draining bool                    `json:"draining"`
	Families map[string]familyHealth `json:"families"`

	// ObjectStorage is the bucket of the file bytes (store.blobs): ok or unavailable, with
	// ObjectStorageReason; absent without one. It never makes the node unready (see
	// ops_bucket.go).
	ObjectStorage       string `json:"object_storage,omitempty"`
	ObjectStorageReason string `json:"object_storage_reason,omitempty"`
	// storeReason is why the store cannot serve, when Store is unavailable.
	storeReason string
}

type configReport struct {
	Models      int `json:"models"`
	Deployments int `json:"deployments"`
}

// familyHealth is one family's deployments: how many, and how many are not excluded.
type familyHealth struct {
	Status      string `json:"status"` // ok or failing
	Healthy     int    `json:"healthy"`
	Deployments int    `json:"deployments"`
}

func (g *Gateway) readiness(now time.Time) readinessReport {
	r := readinessReport{Families: map[string]familyHealth{}, Draining: g.obs.draining.Load()}
	st := g.state.Load()
	if st == nil {
		r.Reasons = append(r.Reasons, "no config loaded")
	} else {
		r.Config = &configReport{Models: len(st.models), Deployments: len(st.deps)}
		servable := familyReport(st, now.UnixNano(), r.Families)
		if servable == 0 {
			r.Reasons = append(r.Reasons, "no family has a healthy deployment")
		}
	}
	r.Store, r.storeReason = g.storeReadiness()
	if r.storeReason != "" {
		r.Reasons = append(r.Reasons, r.storeReason)
	}
	r.ObjectStorage, r.ObjectStorageReason = g.objectStorageReadiness(now)
	if r.Draining {
		r.Reasons = append(r.Reasons, "shutting down")
	}
	r.Ready = len(r.Reasons) == 0
	return r
}

// familyReport fills out with each family that has deployments and returns
// how many of them have a healthy one.
func familyReport(st *state, now int64, out map[string]familyHealth) int {
	var total, healthy [family.Count]int
	for _, d := range st.deps {
		total[d.Family()]++
		if !d.Excluded(now) {
			healthy[d.Family()]++
		}
	}
	servable := 0
	for f := range family.Count {
		if total[f] == 0 {
			continue
		}
		h := familyHealth{Status: "ok", Healthy: healthy[f], Deployments: total[f]}
		if healthy[f] == 0 {
			h.Status = "failing"
		} else {
			servable++
		}
		out[f.String()] = h
	}
	return servable
}

// storeReadiness returns the store's state for /readyz and the reason it
// makes the node unready, if any. A shared store that cannot serve now makes the
// node unready with the reason in words; the calls that need no state still
// serve meanwhile, and those that do answer 503 with Retry-After.
func (g *Gateway) storeReadiness() (state, reason string) {
	s := g.obs.store
	switch {
	case s == nil:
		return "none", "" // the endpoints that need one answer 503; the rest serve
	case s.closed.Load():
		return "closed", "the store is closed"
	}
	if err := s.check(); err != nil {
		return "unavailable", err.Error()
	}
	return "open", ""
}
