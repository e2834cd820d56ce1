package proxy

import (
	"bytes"
	"errors"
	"sync"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream"
	"github.com/modelgate/gateway/store"
)

const responsesBase = "/v1/router/beta/v1/responses"

func (g *Gateway) routeResponses(r *router.Router) {
	r.POST(responsesBase, g.responsesCreate)
	r.GET(responsesBase, g.responsesWebSocket)
	r.GET(responsesBase+"/{id}", g.responsesGet)
	r.DELETE(responsesBase+"/{id}", g.responsesDelete)
	r.GET(responsesBase+"/{id}"+inputItems, g.responsesInputItems)
	r.POST(responsesBase+"/input_tokens", g.responsesInputTokens)
	r.POST(responsesBase+"/compact", g.responsesCompact)
}

// responsesCreate forwards a create byte for byte, less any session_id. A first
// create is routed by model (with session_id or x-session-id affinity); a continuation of an owned response goes
// to the deployment that holds it and inherits its model when none is given.
// The new response's ownership record is written before the end of the answer
// reaches the client.
func (g *Gateway) responsesCreate(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Beta, epResponsesCreate)
	defer c.end()
	if !c.refuseIdempotencyKey() || !c.authenticate() || !c.needStore() ||
		!c.readBody(c.st.cfg.Limits.MaxBodyBytes) || !c.peekBody() {
		return
	}
	dep, r, ok := c.responsesRoute()
	if !ok {
		return
	}
	if !c.fields.NoStore {
		c.record = responseRecords.Get().(*responseRecord)
		c.record.owned = store.Response{Owner: c.keyID, Model: c.routeModelName()}
		c.onAnswer = recordFromBody
		c.onStream = recordFromStream
		// response.created may echo a large request (instructions, input):
		// the id is read from it whatever its size, within the answer bound.
		c.record.scanner.Reset(c.st.cfg.Limits.MaxResponseBytes)
	}
	if dep != nil {
		c.forwardTo(dep, "/responses", c.bodyWithoutSessionID(), c.fields.Stream)
		return
	}
	c.forward(r, "/responses", c.bodyWithoutSessionID(), c.fields.Stream)
}

// responsesRoute resolves where a create, input_tokens or compact call goes:
// an owned previous_response_id pins its deployment; otherwise model and the
// session key (body session_id, else the x-session-id header) choose one.
func (c *call) responsesRoute() (dep *upstream.Deployment, r *upstream.Route, ok bool) {
	if prev := c.fields.PreviousResponseID; len(prev) > 0 {
		rec, dep, ok := c.ownedResponse(prev, true)
		if !ok {
			return nil, nil, false
		}
		c.inherited = rec.Model
		if len(c.fields.Model) > 0 {
			if c.routeNamed(c.fields.Model, nil) == nil {
				return nil, nil, false
			}
		} else if m, ok := c.st.models[rec.Model]; ok {
			c.model = m
		}
		return dep, nil, true
	}
	if len(c.fields.Model) == 0 {
		c.fail(&Error{Status: 400, Reason: "model_missing", Param: "model",
			Message: "model is required (or previous_response_id naming one of your responses)"})
		return nil, nil, false
	}
	if !c.sessionKey() {
		return nil, nil, false
	}
	r = c.routeModel(nil)
	return nil, r, r != nil
}

// routeModelName is the model a new response is recorded under: the body's
// (the routed model's id, the same name without a copy), else the one
// inherited from the previous response.
func (c *call) routeModelName() string {
	switch {
	case len(c.fields.Model) == 0:
		return c.inherited
	case c.model != nil:
		return c.model.id
	}
	return string(c.fields.Model)
}

// ownedResponse loads the ownership record of id for the caller, and the
// deployment that holds it. Another key's response, an unknown id, and one
// whose deployment is gone are all the same "not found": nothing reveals that
// a response exists. asPrevious shapes the error for previous_response_id.
func (c *call) ownedResponse(id []byte, asPrevious bool) (store.Response, *upstream.Deployment, bool) {
	rec, err := c.g.opts.Store.GetResponse(b2s(id)) // rec.ID is id: used within the call only
	if err == nil && rec.Owner == c.keyID {
		if dep := c.st.deps[rec.Deployment]; dep != nil && dep.Family() == family.Beta {
			return rec, dep, true
		}
		c.g.log.Warn("response held by a deployment no longer configured", "response", rec.ID, "deployment", rec.Deployment)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		c.fail(storeError("cannot read the response record", err))
		return rec, nil, false
	}
	if asPrevious {
		c.fail(&Error{Status: 404, Reason: "response_not_found", Param: "previous_response_id", Code: "previous_response_not_found",
			Message: "Previous response with id '" + string(id) + "' not found."})
	} else {
		c.fail(&Error{Status: 404, Reason: "response_not_found",
			Message: "Response with id '" + string(id) + "' not found."})
	}
	return rec, nil, false
}

// recordFromBody records a plain create's response id before the answer is
// written. A failed write fails the call: a success the gateway cannot
// continue would break the continuation contract.
func recordFromBody(c *call, body []byte) bool {
	if c.status != 200 {
		return true
	}
	id, err := parse.StringValue(c.idBuf[:0], parse.Member(body, "id"))
	if err != nil || len(id) == 0 {
		c.g.log.Warn("responses answer without an id: not recorded", "deployment", c.dep.Name())
		return true
	}
	if err := c.recordResponse(id); err != nil {
		c.ctx.Response.Header.Reset()
		c.fail(storeError("cannot record the response", err))
		return false
	}
	return true
}

// recordFromStream watches a streamed create for its first event, which
// carries the response object, and records its id before that event is
// relayed, so the record exists before the client sees the stream end.
func recordFromStream(c *call, p []byte) {
	if c.status != 200 || c.recorded {
		return
	}
	scanner := &c.record.scanner
	scanner.Feed(p)
	for {
		ev, ok, err := scanner.Next()
		if err != nil || !ok {
			if err != nil { // an event over the bound: the response cannot be recorded
				c.recorded = true
				c.g.log.Error("cannot record streamed response", "err", err)
				c.up.Abort("the gateway could not record the response: an event is larger than its limit")
			}
			return
		}
		raw := parse.Member(parse.Member(ev.Data, "response"), "id")
		if raw == nil {
			continue
		}
		c.recorded = true
		id, err := parse.StringValue(c.idBuf[:0], raw)
		if err == nil && len(id) > 0 {
			err = c.recordResponse(id)
		}
		if err != nil {
			c.g.log.Error("cannot record streamed response", "err", err)
			c.up.Abort("the gateway could not record the response")
		}
		for {
			if _, ok, _ := scanner.Next(); !ok {
				return
			}
		}
	}
}

// responseRecord is what a stored create needs until its response id is
// recorded: the ownership record to write, and the scan of a stream for the
// id. A call takes one from responseRecords and gives it back on release.
type responseRecord struct {
	owned   store.Response
	scanner parse.Scanner
}

var responseRecords = sync.Pool{New: func() any { return new(responseRecord) }}

// releaseRecord gives the call's responseRecord back, if it has one.
func (c *call) releaseRecord() {
	rr := c.record
	if rr == nil {
		return
	}
	rr.owned = store.Response{}
	rr.scanner.Reset(0) // lets go of an event past the Scanner's bound
	c.record = nil
	responseRecords.Put(rr)
}

func (c *call) recordResponse(id []byte) error {
	rec := c.record.owned
	rec.ID = string(id)
	rec.Deployment = c.dep.Name()
	rec.Created = c.g.now()
	c.recorded = true
	return c.g.opts.Store.PutResponse(rec)
}

// The routes of one response are served by responsesOwned; serve matches
// them first (responsesIDRoute), and these, the router's, serve what it does
// not, so that the router still answers the methods they do not allow.
func (g *Gateway) responsesGet(ctx *fasthttp.RequestCtx) {
	g.responsesOwned(ctx, epResponsesGet, idParam(ctx))
}

func (g *Gateway) responsesInputItems(ctx *fasthttp.RequestCtx) {
	g.responsesOwned(ctx, epResponsesInputItems, idParam(ctx))
}

func (g *Gateway) responsesDelete(ctx *fasthttp.RequestCtx) {
	g.responsesOwned(ctx, epResponsesDelete, idParam(ctx))
}

func idParam(ctx *fasthttp.RequestCtx) []byte {
	id, _ := ctx.UserValue("id").(string)
	return s2b(id)
}

const inputItems = "/input_items"

// responsesIDRoute matches what the router's responsesBase+"/{id}" and
// "/{id}/input_items" routes match, on the same raw path, for their methods:
// an id without a slash, not empty but before /input_items.
func responsesIDRoute(ctx *fasthttp.RequestCtx) (id []byte, ep endpoint, ok bool) {
	id, found := bytes.CutPrefix(ctx.Request.URI().PathOriginal(), []byte(responsesBase+"/"))
	if !found || len(id) == 0 {
		return nil, 0, false
	}
	ep = epResponsesGet
	if i := bytes.IndexByte(id, '/'); i >= 0 {
		if string(id[i:]) != inputItems { // an empty id before it is taken, as the router does
			return nil, 0, false
		}
		id, ep = id[:i], epResponsesInputItems
	}
	switch m := ctx.Request.Header.Method(); {
	case string(m) == fasthttp.MethodGet:
	case string(m) == fasthttp.MethodDelete && ep == epResponsesGet:
		ep = epResponsesDelete
	default:
		return nil, 0, false
	}
	return id, ep, true
}

// responsesOwned serves retrieve, delete and input items of the response id
// (which lives as long as the request): owner only, sent to the deployment
// that holds the response, the query string as the client encoded it. An
// unknown or foreign id is answered 404 without an upstream call.
func (g *Gateway) responsesOwned(ctx *fasthttp.RequestCtx, ep endpoint, id []byte) {
	c := g.acquireCall(ctx, family.Beta, ep)
	defer c.end()
	if !c.authenticate() || !c.needStore() {
		return
	}
	rec, dep, ok := c.ownedResponse(id, false)
	if !ok {
		return
	}
	if m, ok := c.st.models[rec.Model]; ok {
		c.model = m
	}
	stream := ep == epResponsesGet && bytes.Contains(ctx.URI().QueryString(), []byte("stream=true"))
	path := append(append(c.idBuf[:0], "/responses/"...), id...)
	if ep == epResponsesInputItems {
		path = append(path, inputItems...)
	}
	c.idBuf = path
	c.forwardTo(dep, b2s(path), nil, stream)
	if ep == epResponsesDelete && (c.status/100 == 2 || c.status == 404) {
		if err := g.opts.Store.DeleteResponse(rec.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			g.log.Error("cannot delete response record", "response", rec.ID, "err", err)
		}
	}
}

func (g *Gateway) responsesInputTokens(ctx *fasthttp.RequestCtx) {
	g.responsesAux(ctx, epResponsesInputTokens, "/responses/input_tokens")
}

func (g *Gateway) responsesCompact(ctx *fasthttp.RequestCtx) {
	g.responsesAux(ctx, epResponsesCompact, "/responses/compact")
}

// responsesAux serves input_tokens and compact: forwarded byte for byte less
// any session_id, routed by model or by an owned previous_response_id.
func (g *Gateway) responsesAux(ctx *fasthttp.RequestCtx, ep endpoint, path string) {
	c := g.acquireCall(ctx, family.Beta, ep)
	defer c.end()
	if !c.refuseIdempotencyKey() || !c.authenticate() || !c.needStore() ||
		!c.readBody(c.st.cfg.Limits.MaxBodyBytes) || !c.peekBody() {
		return
	}
	dep, r, ok := c.responsesRoute()
	if !ok {
		return
	}
	if dep != nil {
		c.forwardTo(dep, path, c.bodyWithoutSessionID(), false)
		return
	}
	c.forward(r, path, c.bodyWithoutSessionID(), false)
}

// responsesWebSocket answers GET on the create path: the WebSocket mode of
// Responses is not offered.
func (g *Gateway) responsesWebSocket(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Beta, epResponsesCreate)
	defer c.end()
	if bytes.EqualFold(ctx.Request.Header.Peek("Upgrade"), []byte("websocket")) {
		c.fail(&Error{Status: 400, Reason: "websocket", Message: "the WebSocket mode of Responses is not supported: use HTTP with \"stream\": true"})
		return
	}
	c.fail(&Error{Status: 405, Reason: "method_not_allowed", Message: "use POST to create a response"})
}

// refuseIdempotencyKey rejects a client-supplied Idempotency-Key, before
// anything else is done for the call.
func (c *call) refuseIdempotencyKey() bool {
	if c.ctx.Request.Header.Peek("Idempotency-Key") == nil {
		return true
	}
	c.fail(&Error{Status: 400, Reason: "idempotency_key", Param: "Idempotency-Key",
		Message: "the Idempotency-Key header is not supported on this endpoint"})
	return false
}

// needStore refuses calls that need the store when the gateway runs without one.
func (c *call) needStore() bool {
	if c.g.opts.Store != nil {
		return true
	}
	c.fail(&Error{Status: 503, Reason: "no_store", Message: "this gateway runs without a store"})
	return false
}
