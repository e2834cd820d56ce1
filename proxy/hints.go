package proxy

import (
	"bytes"

	"github.com/valyala/fasthttp"

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
