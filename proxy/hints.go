package proxy

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
)

// A 404 on a path that a provider's SDK calls means the SDK was given the
// wrong base URL: an OpenAI client on /v1, an Anthropic client on the root.
// The answer says which base URL to use, in the shape of the family the path
// belongs to, so that the SDK shows the message.

// sdkCall is the tail of a path that one family's SDK calls below its base URL.
type sdkCall struct {
	tail []byte
	fam  family.Family
}

var sdkCalls = []sdkCall{
	{[]byte("/v1/messages"), family.Alpha},
	{[]byte("/chat/completions"), family.Beta},
	{[]byte("/responses"), family.Beta},
	{[]byte("/images/generations"), family.Beta},
	{[]byte("/embeddings"), family.Beta},
	{[]byte("/models/"), family.Gamma}, // {version}/models/{model}:generateContent
	{[]byte("/files"), family.Beta},    // alpha's too: told apart by anthropic-version
}

// sdkBase is the base URL path each family's SDK takes, and how the SDK names it.
var sdkBase = [family.Count]struct{ path, setting string }{
	family.Alpha: {"/v1/router/alpha", "the Anthropic SDK's base URL"},
	family.Beta:  {"/v1/router/beta/v1", "the OpenAI SDK's base URL"},
	family.Gamma: {"/v1/router/gamma", "the genai SDK's HTTPOptions.BaseURL (with APIVersion v1beta or v1)"},
}

// baseURLHint returns, for a path no route serves, the family whose SDK calls
// it and the message that names the base URL to use; ok is false when the
// path is no SDK's.
func baseURLHint(ctx *fasthttp.RequestCtx) (fam family.Family, msg string, ok bool) {
	p := ctx.Path()
	for _, s := range sdkCalls {
		i := bytes.Index(p, s.tail)
		if i < 0 {
			continue
		}
		fam = s.fam
		switch {
		case fam == family.Gamma && !bytes.Contains(p[i:], []byte(":generateContent")) && !bytes.Contains(p[i:], []byte(":streamGenerateContent")):
			continue
		case fam == family.Gamma:
			i = bytes.LastIndexByte(p[:i], '/') // the {version} segment is the SDK's, not the base's
			if i < 0 {
				continue
			}
		case bytes.HasPrefix(s.tail, []byte("/files")) && len(ctx.Request.Header.Peek("anthropic-version")) > 0:
			fam = family.Alpha
			i = bytes.Index(p, []byte("/v1/files"))
			if i < 0 {
				continue
			}
		}
		if bytes.Equal(p[:i], []byte(sdkBase[fam].path)) {
			break // the right base, an endpoint it does not have
		}
		host := "http://" + string(ctx.Host())
		msg = "unknown path " + string(p) + ": the client's base URL looks like " + host + string(p[:i]) +
			"; for this gateway set " + sdkBase[fam].setting + " to " + host + sdkBase[fam].path
		return fam, msg, true
	}
	return familyOfPath(p), "", false
}

// A deployment whose base_url is a known provider's host, but not the base
// URL that provider's own SDK takes, gets every call answered by the
// provider's 404: https://api.openai.com without its /v1, for one. Such a
// base_url is valid, so it is no config error; check and start warn of it.

// providerBase is the path of the base URL a provider's SDK takes on host.
type providerBase struct {
	host string
	fam  family.Family
	path string
}

var providerBases = []providerBase{
	{"api.openai.com", family.Beta, "/v1"},
	{"api.mistral.ai", family.Beta, "/v1"},
	{"api.x.ai", family.Beta, "/v1"},
	{"api.groq.com", family.Beta, "/openai/v1"},
	{"api.anthropic.com", family.Alpha, ""},
	{"generativelanguage.googleapis.com", family.Gamma, ""},
}

// upstreamTail is what the gateway appends to a deployment's base URL, by family.
var upstreamTail = [family.Count]string{
	family.Alpha: "/v1/messages",
	family.Beta:  "/chat/completions",
	family.Gamma: "/{version}/models/{model}:generateContent",
}

// BaseURLHints returns one line for each deployment of cfg whose base_url
// names a known provider's host with another path than its SDK's base URL.
func BaseURLHints(cfg *config.Config) []string {
	var hints []string
	for i, u := range cfg.Upstreams {
		fam, ok := family.Parse(u.Family)
		base, err := url.Parse(u.BaseURL)
		if !ok || err != nil {
			continue
		}
		path := strings.TrimSuffix(base.Path, "/")
		for _, p := range providerBases {
			if p.fam != fam || !strings.EqualFold(base.Hostname(), p.host) || path == p.path {
				continue
			}
			want := *base
			want.Path = p.path
			hints = append(hints, fmt.Sprintf("upstreams[%d].base_url: %s is not the base URL of %s's SDK: the gateway appends %s to it, which %s answers with 404; use %s",
				i, u.BaseURL, p.host, upstreamTail[fam], p.host, want.String()))
		}
	}
	return hints
}
