package proxy

import (
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Model fallbacks (docs/routing.md): a call none of whose model's
// deployments could answer goes to the deployments of the next model of
// models[].fallbacks, in the call's family and group, with the body's model
// spliced to that model's id or to the deployment's own name for it. The
// call then is the served model's: its access line, metrics, limits and
// tokens, and the answer's x-gateway-model header. Only again (forward.go)
// and forward's first choice fall back; a call bound to one deployment never
// does.

// fallsBack reports whether a failure for reason, with no deployment of the
// model left, lets the call go to a fallback model: a failure before any
// answer, or the provider's refusal for load (429, 529). Another 5xx is the
// model's answer; a fallback model would not make it right.
func fallsBack(reason upstream.RetryReason) bool {
	switch reason {
	case upstream.Retry500, upstream.Retry502, upstream.Retry503, upstream.Retry504:
		return false
	}
	return true
}

// hasFallback reports whether the call's chain has a model left to try.
func (c *call) hasFallback() bool {
	if c.asked != nil {
		return c.nextFallback < len(c.asked.fallbacks)
	}
	return c.model != nil && c.model.fallbacks != nil
}

// fallBack moves the call to the next model of its chain that the key may
// use, that has a deployment in the call's family and group to pick, that
// the key's limits admit and whose renamed body fits the body budget, and
// returns that choice; nil, with the call unchanged, when none is left.
func (c *call) fallBack(bodyLen int) (*upstream.Route, int, *upstream.Deployment) {
	asked := c.asked
	if asked == nil {
		asked = c.model // the call has not fallen back yet: it keeps its model until it does
	}
	chain := asked.fallbacks
	for c.nextFallback < len(chain) {
		fb := chain[c.nextFallback]
		c.nextFallback++
		if (c.ep == epImages || c.ep == epGenerateContent) && !fb.image || !c.access.Allows(s2b(fb.id)) {
			continue
		}
		_, r, _ := c.st.routeFor(s2b(fb.id), c.family, c.group)
		if r == nil {
			continue
		}
		i, dep := r.Pick(c.sessionHash, c.hasSession, 0)
		if dep == nil || !c.reserveFallback(fb, bodyLen) {
			continue
		}
		var t ratelimit.Ticket
		if !c.g.limits.Admit(c.keyID, fb.id, &t).Admitted() {
			continue
		}
		if c.ticket.Held() {
			c.g.limits.Done(&c.ticket, 0)
		}
		c.ticket, c.model, c.asked = t, fb, asked
		return r, i, dep
	}
	return nil, -1, nil
}

// reserveFallback reserves the body budget the renamed body of fb needs (see
// reserveRenamed) for a body of bodyLen bytes: false when it does not fit.
func (c *call) reserveFallback(fb *model, bodyLen int) bool {
	if c.ep == epGenerateContent || bodyLen == 0 || c.fields.Model == nil {
		return true
	}
	longest := len(fb.self.json)
	for _, pm := range fb.renamed {
		longest = max(longest, len(pm.json))
	}
	return c.growShare(&c.shares.renamed, max(bodyLen, len(c.body))+longest) == nil
}

// providerModel returns what dep calls the call's model, when the body or
// path sent there must say so: a renamed deployment's own name, or, once the
// call fell back, the served model's id.
func (c *call) providerModel(dep *upstream.Deployment) (providerModel, bool) {
	if c.model == nil || (c.model.renamed == nil && c.asked == nil) {
		return providerModel{}, false
	}
	if pm, ok := c.model.renamed[dep.Name()]; ok {
		return pm, true
	}
	return c.model.self, c.asked != nil
}

// setServedModel names the model that served a call that fell back.
func (c *call) setServedModel() {
	if c.asked != nil {
		c.ctx.Response.Header.Set("x-gateway-model", c.model.id)
	}
}
