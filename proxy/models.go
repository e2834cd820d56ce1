package proxy

import (
	"encoding/json"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream"
)

// The model list where each family's SDK looks for it. Beta: the spec's
// GET /v1/models, also on the OpenAI base URL (/v1/router/beta/v1/models), and
// retrieve-one at .../models/{id} on both. Alpha: the Anthropic shape on every
// alpha base, listing the models that have an alpha deployment (in the
// group, on a grouped base), and retrieve-one. Every body is rendered once
// per config; each call takes its family's auth.

const betaModelsPath = "/v1/router/beta/v1/models"

func (g *Gateway) routeModels(r *router.Router) {
	for _, p := range []string{"/v1/models", betaModelsPath} {
		r.GET(p, g.models)
		r.GET(p+"/{model_id}", g.betaModel)
	}
	for _, base := range alphaBases {
		r.GET(base+"/v1/models", g.alphaModels)
		r.GET(base+"/v1/models/{model_id}", g.alphaModel)
	}
}

// modelLists are a config's model list bodies but the spec's own (modelList).
// Immutable once rendered.
type modelLists struct {
	betaOne map[string][]byte
	// alpha is the list on the ungrouped alpha bases, alphaGroup per group.
	alpha      []byte
	alphaGroup map[string][]byte
	alphaOne   map[string][]byte
}

// alphaModelEntry is a model in the Anthropic shape. display_name is the id:
// the config has no other name; created_at is created in RFC 3339.
type alphaModelEntry struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// alphaModelPage is the Anthropic list page: one page, has_more false.
type alphaModelPage struct {
	Data    []alphaModelEntry `json:"data"`
	HasMore bool              `json:"has_more"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
}

// renderModelLists renders every model list body of the state from the beta
// entries, in config order.
func (st *state) renderModelLists(entries []modelEntry) error {
	var err error
	st.modelList, err = json.Marshal(struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{"list", entries})
	if err != nil {
		return err
	}
	l := modelLists{betaOne: map[string][]byte{}, alphaOne: map[string][]byte{}, alphaGroup: map[string][]byte{}}
	all := make([]alphaModelEntry, 0, len(entries))
	for _, e := range entries {
		if l.betaOne[e.ID], err = json.Marshal(e); err != nil {
			return err
		}
		if st.models[e.ID].routes[family.Alpha] == nil {
			continue
		}
		a := alphaModelEntry{Type: "model", ID: e.ID, DisplayName: e.ID,
			CreatedAt: time.Unix(e.Created, 0).UTC().Format(time.RFC3339)}
		all = append(all, a)
		if l.alphaOne[e.ID], err = json.Marshal(a); err != nil {
			return err
		}
	}
	if l.alpha, err = alphaPage(all, nil); err != nil {
		return err
	}
	for name := range st.groups {
		in := func(id string) bool { rs := st.models[id].grouped[name]; return rs != nil && rs[family.Alpha] != nil }
		if l.alphaGroup[name], err = alphaPage(all, in); err != nil {
			return err
		}
	}
	st.lists = l
	return nil
}

// alphaPage renders the page of the entries that keep accepts (all when nil).
func alphaPage(all []alphaModelEntry, keep func(id string) bool) ([]byte, error) {
	p := alphaModelPage{Data: make([]alphaModelEntry, 0, len(all))}
	for _, a := range all {
		if keep == nil || keep(a.ID) {
			p.Data = append(p.Data, a)
		}
	}
	if n := len(p.Data); n > 0 {
		p.FirstID, p.LastID = &p.Data[0].ID, &p.Data[n-1].ID
	}
	return json.Marshal(p)
}

func (g *Gateway) models(ctx *fasthttp.RequestCtx) {
	g.serveModels(ctx, family.Beta, func(st *state) []byte { return st.modelList })
}

func (g *Gateway) betaModel(ctx *fasthttp.RequestCtx) {
	g.serveModels(ctx, family.Beta, func(st *state) []byte { return st.lists.betaOne[modelParam(ctx)] })
}

func (g *Gateway) alphaModels(ctx *fasthttp.RequestCtx) {
	g.serveModels(ctx, family.Alpha, func(st *state) []byte {
		if group := groupParam(ctx); group != nil {
			return st.lists.alphaGroup[b2s(group)]
		}
		return st.lists.alpha
	})
}

func (g *Gateway) alphaModel(ctx *fasthttp.RequestCtx) {
	g.serveModels(ctx, family.Alpha, func(st *state) []byte {
		id := modelParam(ctx)
		if group := groupParam(ctx); group != nil {
			rs := st.models[id].groupRoutes(b2s(group))
			if rs == nil || rs[family.Alpha] == nil {
				return nil
			}
		}
		return st.lists.alphaOne[id]
	})
}

// serveModels authenticates the caller as fam does and answers the body
// pick returns for the config in force; nil is an unknown model, answered 404
// in the family's shape, as is an unknown group.
func (g *Gateway) serveModels(ctx *fasthttp.RequestCtx, fam family.Family, pick func(*state) []byte) {
	c := g.acquireCall(ctx, fam, epModels)
	defer c.end()
	if !c.authenticate() || !c.knownGroup() {
		return
	}
	body := c.visibleModels(pick(c.st), fam)
	if body == nil {
		c.fail(&Error{Status: 404, Reason: "model_unknown", Code: "model_not_found",
			Message: "the model '" + modelParam(ctx) + "' does not exist or you do not have access to it"})
		return
	}
	c.status = 200
	ctx.Response.Header.SetContentType("application/json")
	c.setRequestIDHeader()
	ctx.Response.SetBodyRaw(body)
}

// modelParam returns the {model_id} path segment, or "".
func modelParam(ctx *fasthttp.RequestCtx) string {
	v, _ := ctx.UserValue("model_id").(string)
	return v
}

// groupRoutes returns the model's routes in the named group; nil for a nil
// model or an unknown group.
func (m *model) groupRoutes(group string) *[family.Count]*upstream.Route {
	if m == nil {
		return nil
	}
	return m.grouped[group]
}
