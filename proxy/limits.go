package proxy

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/ratelimit"
)

// Rate limits (see proxy/ratelimit and docs/rate-limits.md): a call that
// goes to a provider is admitted by its key's limits once the key and the
// model are known and before a deployment is picked; finish gives its hold
// back and charges the tokens its answer reported.

// admit decides the call by its key's limits, answering a refusal itself.
func (c *call) admit() bool {
	model := ""
	if c.model != nil {
		model = c.model.id
	}
	v := c.g.limits.Admit(c.keyID, model, &c.ticket)
	if v.Admitted() {
		return true
	}
	c.refuseLimit(&v)
	return false
}

// settleLimits ends the call's hold on its key's limits, charging the input
// and output tokens of its answer (each at most 18 digits, see
// parse.ReadUsage; Done charges at most ratelimit.MaxCallTokens).
func (g *Gateway) settleLimits(c *call) {
	if !c.ticket.Held() {
		return
	}
	var tokens int64
	if u := c.up.Usage(); u.Found {
		tokens = u.Input + u.Output
	}
	g.limits.Done(&c.ticket, tokens)
}

// countsUsage reports whether the call reads the token usage of its answer:
// for the metrics, or for its key's tokens limit. Only a call that makes the
// model generate does: a retrieve of a stored response, its input items or
// its deletion answers with the usage of a generation already counted at its
// create (background responses, whose create answers before the generation,
// are not served with their lifecycle; see the README).
func (c *call) countsUsage() bool {
	switch c.ep {
	case epResponsesGet, epResponsesDelete, epResponsesInputItems:
		return false
	}
	return !c.g.opts.NoTokenUsage || c.ticket.CountsTokens()
}

// refuseLimit answers 429 (503 when the shared counters are unreachable and
// the gateway fails closed) in the family's shape, with Retry-After and the
// rate-limit headers its SDKs read.
func (c *call) refuseLimit(v *ratelimit.Verdict) {
	e := &Error{Status: 429, Reason: "rate_limit_" + v.Kind.String(), Code: "rate_limit_exceeded",
		RetryAfter: retryAfterSeconds(v.RetryAfter), Type: "requests", Message: limitMessage(c.keyID, v)}
	if v.Kind == ratelimit.KindTokens {
		e.Type = "tokens"
	}
	if v.Kind == ratelimit.KindUnavailable {
		e = &Error{Status: 503, Reason: "rate_limit_unavailable", RetryAfter: 1,
			Message: "the gateway cannot check this key's rate limits now; retry shortly"}
	}
	c.fail(e)
	if v.Kind != ratelimit.KindUnavailable {
		setLimitHeaders(&c.ctx.Response.Header, c.family, v, c.g.now())
	}
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

func limitMessage(key string, v *ratelimit.Verdict) string {
	scope := "key '" + key + "'"
	if v.Model != "" {
		scope += " on model '" + v.Model + "'"
	}
	var what string
	switch v.Kind {
	case ratelimit.KindRequests:
		what = strconv.FormatInt(v.Limits.RequestsPerMinute, 10) + " requests per minute"
	case ratelimit.KindTokens:
		what = strconv.FormatInt(v.Limits.TokensPerMinute, 10) + " tokens per minute"
	default:
		what = strconv.FormatInt(v.Limits.Concurrent, 10) + " concurrent requests"
	}
	return "rate limit exceeded: " + scope + " allows " + what + "; retry after " +
		strconv.Itoa(retryAfterSeconds(v.RetryAfter)) + "s"
}

// setLimitHeaders sets the limits of the bucket that refused, as the
// family's provider names them: beta x-ratelimit-{limit,remaining,reset}-
// {requests,tokens} (reset as a duration, 1s or 6m0s), alpha
// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset} (reset as
// RFC 3339). Gamma has none: its body carries a RetryInfo.
func setLimitHeaders(h *fasthttp.ResponseHeader, fam family.Family, v *ratelimit.Verdict, now time.Time) {
	kinds := [2]struct {
		name             string
		limit, remaining int64
		reset            time.Duration
	}{
		{"requests", v.Limits.RequestsPerMinute, v.ReqRemaining, v.ReqReset},
		{"tokens", v.Limits.TokensPerMinute, v.TokRemaining, v.TokReset},
	}
	for _, k := range kinds {
		if k.limit <= 0 {
			continue
		}
		switch fam {
		case family.Beta:
			h.Set("x-ratelimit-limit-"+k.name, strconv.FormatInt(k.limit, 10))
			h.Set("x-ratelimit-remaining-"+k.name, strconv.FormatInt(k.remaining, 10))
			h.Set("x-ratelimit-reset-"+k.name, k.reset.Round(time.Millisecond).String())
		case family.Alpha:
			h.Set("anthropic-ratelimit-"+k.name+"-limit", strconv.FormatInt(k.limit, 10))
			h.Set("anthropic-ratelimit-"+k.name+"-remaining", strconv.FormatInt(k.remaining, 10))
			h.Set("anthropic-ratelimit-"+k.name+"-reset", now.Add(k.reset).UTC().Truncate(time.Second).Format(time.RFC3339))
		}
	}
}
