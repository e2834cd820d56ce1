package sim

import (
	"bytes"
	"net/http"
	"net/textproto"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	native "github.com/modelgate/gateway/proxy/family"
)

// family is the provider protocol family a request speaks.
type family uint8

const (
	famAlpha family = iota + 1 // Anthropic Messages
	famBeta                    // OpenAI
	famGamma                   // Gemini
)

var parserPool fastjson.ParserPool

// bufPool holds answer buffers; huge ones (images) are not kept.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 1<<20 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// Handler answers one request. It records it (unless Options.NoRecord), applies
// the controls and faults, then serves it as its family would.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	if bytes.Equal(ctx.Path(), faultPath) {
		s.serveFault(ctx)
		return
	}
	if !s.o.NoRecord {
		s.record(ctx)
	}
	fam := familyOf(ctx)
	s.startAnswer(ctx, fam)
	var c control
	if err := s.readControl(&ctx.Request.Header, &c); err != nil {
		s.fail(ctx, fam, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if c.fault.Reset {
		hijackReset(ctx)
		return
	}
	if d := c.latency + c.fault.FirstByteDelay; d > 0 && !s.sleep(d) {
		return
	}
	if c.fault.Status != 0 {
		s.fail(ctx, fam, c.fault.Status, "Simulated failure (x-sim-fault).")
		setRetryAfter(ctx, &c.fault)
	} else {
		s.route(ctx, fam, &c)
	}
	if c.fault.CutAfter > 0 && !ctx.Response.IsBodyStream() && !ctx.Hijacked() {
		hijackPartial(ctx, c.fault.CutAfter)
	}
	if c.fault.DropIdle && !ctx.Hijacked() {
		dropAfterAnswer(ctx)
	}
}

func (s *Server) route(ctx *fasthttp.RequestCtx, fam family, c *control) {
	switch fam {
	case famAlpha:
		s.serveAlpha(ctx, c)
	case famGamma:
		s.serveGamma(ctx, c)
	default:
		s.serveBeta(ctx, c)
	}
}

// familyOf tells the family from the path, then from the auth headers.
func familyOf(ctx *fasthttp.RequestCtx) family {
	p := ctx.Path()
	h := &ctx.Request.Header
	switch {
	case bytes.HasPrefix(p, []byte("/v1beta/")),
		bytes.HasPrefix(p, []byte("/v1/models/")) && bytes.IndexByte(p, ':') >= 0:
		return famGamma
	case bytes.HasPrefix(p, []byte("/v1/messages")):
		return famAlpha
	case len(h.Peek("x-goog-api-key")) > 0:
		return famGamma
	case len(h.Peek("x-api-key")) > 0, len(h.Peek("anthropic-version")) > 0:
		return famAlpha
	}
	return famBeta
}

// startAnswer sets the headers every answer of the family carries: its
// request id and the rest of what the provider's answers carry (see
// providerHeaders), so that a proxy in front parses and relays a head of the
// size it would in production.
func (s *Server) startAnswer(ctx *fasthttp.RequestCtx, fam family) {
	h := &ctx.Response.Header
	h.DisableNormalizing() // lower-case names, as the providers' front ends send them over HTTP/1.1
	h.Set("x-sim-deployment", s.o.Name)
	var buf [64]byte
	var id []byte
	switch fam {
	case famAlpha:
		id = s.ids.appendHex(buf[:0], "req_", 24)
		h.SetBytesV("request-id", id)
	case famBeta:
		id = s.ids.appendHex(buf[:0], "req_", 32)
		h.SetBytesV("x-request-id", id)
	}
	for _, kv := range providerHeaders[fam] {
		h.Add(kv[0], kv[1])
	}
	switch fam {
	case famAlpha:
		reset := s.resetStamp()
		for _, k := range alphaResetHeaders {
			h.Add(k, reset)
		}
	case famGamma:
		return
	}
	// Cloudflare's ray id, taken from the request id so that the golden
	// transcripts' ids stay as they were.
	ray := append(buf[len(id):len(id)], id[len(id)-16:]...)
	h.AddBytesV("cf-ray", append(ray, "-SJC"...))
}

// BetaHeaders returns the headers the simulated OpenAI sends with every
// answer besides its request id, framing, Date, Server and cf-ray (see
// providerHeaders), for benchmarks that answer as it does without it. The
// slice is shared: read only.
func BetaHeaders() [][2]string { return providerHeaders[famBeta] }

// providerHeaders are the headers, besides the request id, framing, Date and
// Server, that each family's provider sends with every answer (read from
// their answers in 2025: OpenAI's organisation, version, processing time and
// rate limits; Anthropic's rate limits and organisation; Gemini's Google
// front-end headers). The values are fixed: what a proxy pays for is their
// number and size.
var providerHeaders = [famGamma + 1][][2]string{
	famBeta: {
		{"access-control-expose-headers", "X-Request-ID"},
		{"openai-organization", "user-simulated0000000000000"},
		{"openai-processing-ms", "312"},
		{"openai-project", "proj_simulated00000000000000"},
		{"openai-version", "2020-10-01"},
		{"x-envoy-upstream-service-time", "318"},
		{"x-ratelimit-limit-requests", "10000"},
		{"x-ratelimit-limit-tokens", "30000000"},
		{"x-ratelimit-remaining-requests", "9999"},
		{"x-ratelimit-remaining-tokens", "29999977"},
		{"x-ratelimit-reset-requests", "6ms"},
		{"x-ratelimit-reset-tokens", "0s"},
		{"strict-transport-security", "max-age=31536000; includeSubDomains; preload"},
		{"cf-cache-status", "DYNAMIC"},
		{"x-content-type-options", "nosniff"},
		{"alt-svc", `h3=":443"; ma=86400`},
	},
	famAlpha: {
		{"anthropic-ratelimit-requests-limit", "4000"},
		{"anthropic-ratelimit-requests-remaining", "3999"},
		{"anthropic-ratelimit-input-tokens-limit", "2000000"},
		{"anthropic-ratelimit-input-tokens-remaining", "1999000"},
		{"anthropic-ratelimit-output-tokens-limit", "400000"},
		{"anthropic-ratelimit-output-tokens-remaining", "400000"},
		{"anthropic-ratelimit-tokens-limit", "2400000"},
		{"anthropic-ratelimit-tokens-remaining", "2399000"},
		{"anthropic-organization-id", "5b7a5b6e-7c1d-4a4e-9a43-0c2f6e1d3a55"},
		{"strict-transport-security", "max-age=31536000; includeSubDomains; preload"},
		{"via", "1.1 google"},
		{"cf-cache-status", "DYNAMIC"},
		{"x-robots-tag", "none"},
	},
	famGamma: {
		{"vary", "Origin, X-Origin, Referer"},
		{"server-timing", "gfet4t7; dur=412"},
		{"x-xss-protection", "0"},
		{"x-frame-options", "SAMEORIGIN"},
		{"x-content-type-options", "nosniff"},
		{"alt-svc", `h3=":443"; ma=2592000,h3-29=":443"; ma=2592000`},
	},
}

// alphaResetHeaders carry when each of Anthropic's limits is next full, as
// an RFC 3339 time.
var alphaResetHeaders = [...]string{
	"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-input-tokens-reset",
	"anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-tokens-reset",
}

// resetStamp returns the next second as RFC 3339, formatted once a second.
func (s *Server) resetStamp() string {
	sec := s.now().Unix() + 1
	if st := s.stamp.Load(); st != nil && st.sec == sec {
		return st.text
	}
	st := &stamp{sec: sec, text: time.Unix(sec, 0).UTC().Format(time.RFC3339)}
	s.stamp.Store(st)
	return st.text
}

// stamp is a formatted second.
type stamp struct {
	sec  int64
	text string
}

// record keeps a copy of the request.
func (s *Server) record(ctx *fasthttp.RequestCtx) {
	uri := ctx.Request.Header.RequestURI()
	path, query, _ := bytes.Cut(uri, []byte{'?'})
	r := Request{
		Method:   string(ctx.Method()),
		Path:     string(path),
		RawQuery: string(query),
		Header:   make(http.Header),
		Body:     append([]byte(nil), ctx.Request.Body()...),
	}
	for k, v := range ctx.Request.Header.All() {
		key := textproto.CanonicalMIMEHeaderKey(string(k))
		r.Header[key] = append(r.Header[key], string(v))
	}
	s.recMu.Lock()
	if len(s.recs) < s.o.RecordLimit {
		s.recs = append(s.recs, r)
	} else { // a full ring: overwrite the oldest
		s.recs[s.recNext] = r
		s.recNext = (s.recNext + 1) % len(s.recs)
	}
	s.recMu.Unlock()
}

// Requests returns copies of the recorded requests, oldest first.
func (s *Server) Requests() []Request {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	out := make([]Request, len(s.recs))
	for i := range s.recs {
		r := s.recs[(s.recNext+i)%len(s.recs)]
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Reset forgets the recorded requests; stored responses and images stay.
func (s *Server) Reset() {
	s.recMu.Lock()
	clear(s.recs)
	s.recs = s.recs[:0]
	s.recNext = 0
	s.recMu.Unlock()
}

// setJSON answers status with body (copied) as application/json.
func setJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// fail answers status with the family's native error body.
func (s *Server) fail(ctx *fasthttp.RequestCtx, fam family, status int, msg string) {
	switch fam {
	case famAlpha:
		s.alphaError(ctx, status, native.AlphaErrorType(status), msg)
	case famGamma:
		gammaError(ctx, status, msg)
	default:
		betaError(ctx, betaErr{status: status, msg: msg})
	}
}

// parseBody parses the JSON object body of ctx with p. It reports ok=false after
// answering the family's native error.
func (s *Server) parseBody(ctx *fasthttp.RequestCtx, fam family, p *fastjson.Parser) (*fastjson.Value, bool) {
	v, err := p.ParseBytes(ctx.Request.Body())
	if err == nil && v.Type() == fastjson.TypeObject {
		return v, true
	}
	switch fam {
	case famAlpha:
		s.alphaError(ctx, 400, "invalid_request_error", "There was an error parsing the body of your request: the body is not a JSON object.")
	case famGamma:
		gammaError(ctx, 400, "Invalid JSON payload received. Expected a JSON object.")
	default:
		betaError(ctx, betaErr{status: 400, msg: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"})
	}
	return nil, false
}

// firstUnknown returns the first top-level key of o that known lacks, or "".
func firstUnknown(o *fastjson.Object, known map[string]struct{}) string {
	bad := ""
	o.Visit(func(k []byte, _ *fastjson.Value) {
		if _, ok := known[b2s(k)]; !ok && bad == "" {
			bad = string(k)
		}
	})
	return bad
}

// knownModel reports whether model may be served: any model when Options.Models is empty.
func (s *Server) knownModel(model []byte) bool {
	if s.o.Models == nil {
		return true
	}
	for _, m := range s.o.Models {
		if m == b2s(model) {
			return true
		}
	}
	return false
}

// estimateTokens is a rough token count of n bytes of text.
func estimateTokens(n int) int64 {
	return int64(max(1, (n+3)/4))
}
