package proxy

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
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
		return c.reserveSpend() // the key's money budgets: spend.go
	}
	c.refuseLimit(&v)
	return false
}

// settleLimits ends the call's hold on its key's limits, charging the input
// and output tokens of its answer (see chargedTokens; Done charges at most
// ratelimit.MaxCallTokens).
func (g *Gateway) settleLimits(c *call) {
	if !c.ticket.Held() {
		return
	}
	var tokens int64
	if c.chargesTokens() {
		tokens = c.chargedTokens()
	}
	g.limits.Done(&c.ticket, tokens)
}

// chargesTokens reports whether the call's tokens are charged: to its key's
// tokens limit, or to its key's money budgets (spend.go). It is the one
// predicate behind what charging needs: reading the answer's usage, asking a
// chat stream for it (asksUsage), and estimating usage that never came.
func (c *call) chargesTokens() bool {
	return c.ticket.CountsTokens() || c.hold != nil && c.hold.Held()
}

// asksUsage reports whether the call's request must ask its provider for the
// usage of its stream: a beta chat stream whose tokens are charged and whose
// client did not ask (parse.AppendAskingUsage). The relay then takes what
// that adds out of the client's stream (upstream.Relay.StripUsage).
func (c *call) asksUsage() bool {
	return c.ep == epChat && c.fields.Stream && c.fields.CanAskUsage() && c.chargesTokens()
}

// The estimate of a call whose usage did not come (docs/rate-limits.md):
// input from the request body's bytes, output from the answer relayed.
const (
	// bytesPerInputToken is a bound that text rarely goes under: English
	// takes about 4 bytes a token, code 3, the JSON around a prompt more;
	// only token-dense text (CJK, digits, symbols) comes near 2.
	bytesPerInputToken = 2
	// bytesPerOutputToken is for an answer that is not an event stream: its
	// JSON, names and all, at the average of text.
	bytesPerOutputToken = 4
	// bytesPerStreamedToken is for the generated text of an event stream
	// (upstream.Relay.TextBytes), the same bound as the input's: an alpha
	// delta or a gamma chunk carries several tokens, which one token per
	// event would under-charge.
	bytesPerStreamedToken = 2
)

// generates marks the endpoints whose calls make a model generate; reports
// those whose successful answers always report their usage.
var (
	generates = [numEndpoints]bool{epMessages: true, epChat: true, epResponsesCreate: true,
		epResponsesCompact: true, epImages: true, epGenerateContent: true}
	reports = [numEndpoints]bool{epMessages: true, epChat: true, epResponsesCreate: true, epGenerateContent: true}
)

// chargedTokens returns the input and output tokens the call's answer
// reported or, when they are missing in part or whole (see estimates), the
// estimate: the input reported, else ceil(request bytes / 2); the larger of
// the output reported and the output relayed (of an SSE stream the larger of
// one token per event and ceil(text bytes / 2), of another body
// ceil(bytes / 4)).
func (c *call) chargedTokens() int64 {
	u := c.up.Usage()
	if !c.estimates(&u) {
		if !u.Found {
			return 0
		}
		return u.Input + u.Output
	}
	in := u.Input
	if in <= 0 {
		n := int64(len(c.body))
		if c.up.Streaming() {
			n = int64(c.bodyLen) // the body may be dropped by now (see relay)
		}
		in = (n + bytesPerInputToken - 1) / bytesPerInputToken
	}
	out := (c.up.Sent() + bytesPerOutputToken - 1) / bytesPerOutputToken
	if c.up.SSE() {
		out = max(c.up.Events(), (c.up.TextBytes()+bytesPerStreamedToken-1)/bytesPerStreamedToken)
	}
	return in + max(u.Output, out)
}

// estimates reports whether the usage u of a call that generates may be
// short of what the provider spent: the call was sent and may have reached
// the provider, and its answer did not end (the send failed, the stream was
// cut or its client left), or it succeeded on an endpoint that always
// reports usage and reported none. A call that failed over is judged by its
// last send.
func (c *call) estimates(u *parse.Usage) bool {
	switch {
	case !generates[c.ep] || !c.sent || !c.reached:
		return false
	case !c.up.Ended():
		return true
	}
	return !u.Found && reports[c.ep] && c.status >= 200 && c.status < 300
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
	return !c.g.opts.NoTokenUsage || c.chargesTokens()
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
