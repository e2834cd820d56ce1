package scenario

import (
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/load"
)

// family is the provider family of a request, which decides the simulator's
// credentials.
type family uint8

const (
	alpha family = iota // Anthropic-like: x-api-key and anthropic-version
	beta                // OpenAI-like: Authorization: Bearer
)

// alphaVersion is the anthropic-version header every alpha request carries,
// as anthropic-sdk-go sends it.
const alphaVersion = "2023-06-01"

// request is one request of a scenario, as every kind of target takes it: the
// gateway on its client-facing path with the caller's key, the simulator (and
// a proxy in front of it) on the provider's path with the provider's key.
type request struct {
	fam         family
	method      string // empty: POST with a body, else GET
	gatewayPath string
	simPath     string
	contentType string // empty: application/json when there is a body
	body        []byte
	headers     []load.Header // sent to every target, e.g. x-sim-* controls
	check       load.Check
	// simStatus, when non-zero, is the status a correct answer of the
	// simulator has where it differs from the gateway's (uploads: the
	// simulator has no files endpoint and answers 404 once it read the body).
	simStatus int
}

// spec returns the load spec of r for target t.
func (r *request) spec(env *Env, t *Target) *load.Spec {
	s := &load.Spec{Method: r.method, URL: t.URL + r.targetPath(t), Body: r.body, Check: r.check}
	s.Headers = append(s.Headers, r.auth(env, t)...)
	if t.Kind != Gateway && r.simStatus != 0 {
		s.Check.Status = r.simStatus
	}
	if ct := r.contentType; ct != "" || len(r.body) > 0 {
		if ct == "" {
			ct = "application/json"
		}
		s.Headers = append(s.Headers, load.Header{Name: fasthttp.HeaderContentType, Value: ct})
	}
	s.Headers = append(s.Headers, sdkHeaders[r.fam]...)
	s.Headers = append(s.Headers, r.headers...)
	return s
}

// sdkHeaders are the headers the family's Go SDK sends with every request
// besides its credentials, the body's type and framing (openai-go and
// anthropic-sdk-go 2025, through Go's transport): every target parses and
// relays a head of the size it does in production.
var sdkHeaders = [...][]load.Header{
	alpha: sdkCommon("Anthropic/Go 1.19.0", "1.19.0"),
	beta:  sdkCommon("OpenAI/Go 3.8.1", "3.8.1"),
}

func sdkCommon(agent, version string) []load.Header {
	return []load.Header{
		{Name: "User-Agent", Value: agent},
		{Name: "Accept", Value: "application/json"},
		{Name: "X-Stainless-Lang", Value: "go"},
		{Name: "X-Stainless-Package-Version", Value: version},
		{Name: "X-Stainless-Os", Value: "Linux"},
		{Name: "X-Stainless-Arch", Value: "x64"},
		{Name: "X-Stainless-Runtime", Value: "go"},
		{Name: "X-Stainless-Runtime-Version", Value: "go1.26.0"},
		{Name: "X-Stainless-Retry-Count", Value: "0"},
		{Name: "X-Stainless-Timeout", Value: "600"},
		{Name: "Accept-Encoding", Value: "gzip"},
	}
}

// auth returns the credential headers of r at t: the caller's key at the
// gateway, the provider's key of r's family elsewhere, and for alpha the
// anthropic-version header.
func (r *request) auth(env *Env, t *Target) []load.Header {
	var h []load.Header
	switch {
	case t.Kind == Gateway:
		h = append(h, load.Header{Name: fasthttp.HeaderAuthorization, Value: "Bearer " + env.Keys.Gateway})
	case r.fam == alpha:
		h = append(h, load.Header{Name: "x-api-key", Value: env.Keys.Alpha})
	default:
		h = append(h, load.Header{Name: fasthttp.HeaderAuthorization, Value: "Bearer " + env.Keys.Beta})
	}
	if r.fam == alpha {
		h = append(h, load.Header{Name: "anthropic-version", Value: alphaVersion})
	}
	return h
}

// targetPath returns the path of r at t.
func (r *request) targetPath(t *Target) string {
	if t.Kind == Gateway {
		return r.gatewayPath
	}
	return r.simPath
}

// newRequest builds the fasthttp request s describes, as a load worker sends
// it, with the Mutate of request seq applied.
func newRequest(s *load.Spec, seq uint64) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	s.BuildRequest(req)
	if s.Mutate != nil {
		s.Mutate(req, seq)
	}
	return req
}
