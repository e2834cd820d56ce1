package proxy

import (
	"bytes"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Image generation: the beta images endpoint (OpenAI Images) and the gamma
// generateContent endpoint (Gemini image models). Both forward the client's
// body as received and stream the upstream answer back with its
// Content-Length, so a multi-MiB image passes through a fixed-size relay
// buffer instead of being held whole by the gateway. Request bodies are
// bounded by limits.max_image_body_bytes.

// gammaBases are the bases a genai client may be pointed at.
var gammaBases = []string{"/v1/router/gamma", "/gamma", "/gamma/{group}"}

const imagesPath = "/v1/router/beta/v1/images/generations"

func (g *Gateway) routeImages(r *router.Router) {
	r.POST(imagesPath, g.imagesGenerations)
	for _, base := range gammaBases {
		r.POST(base+"/{version}/models/{model}", g.generateContent)
		// Gemini's media upload and Files API: not offered from this endpoint.
		r.ANY(base+"/upload/{path:*}", g.gammaMediaUnsupported)
		r.ANY(base+"/{version}/files", g.gammaMediaUnsupported)
		r.ANY(base+"/{version}/files/{file}", g.gammaMediaUnsupported)
	}
}

// imagesGenerations serves POST /v1/router/beta/v1/images/generations: model
// and prompt are required, the model must be an image model with a beta
// deployment; the body goes upstream as received (session_id cut out) and
// the answer comes back untouched.
func (g *Gateway) imagesGenerations(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Beta, epImages)
	defer c.end()
	if !c.authenticate() || !c.readBody(c.st.cfg.Limits.MaxImageBodyBytes) || !c.peekBody() {
		return
	}
	if len(c.fields.Model) == 0 {
		c.fail(&Error{Status: 400, Reason: "model_missing", Param: "model", Code: "missing_required_parameter",
			Message: "Missing required parameter: 'model'."})
		return
	}
	if !c.checkPrompt() {
		return
	}
	if m := c.st.models[b2s(c.fields.Model)]; m != nil && !m.image {
		c.fail(&Error{Status: 400, Reason: "model_not_image", Param: "model", Code: "invalid_value",
			Message: "the model '" + m.id + "' is not an image model: it cannot serve images/generations"})
		return
	}
	if !c.sessionKey() {
		return
	}
	r := c.routeModel(nil)
	if r == nil {
		return
	}
	c.forward(r, "/images/generations", c.bodyWithoutSessionID(), true)
}

// checkPrompt requires a non-empty string prompt in the (already validated)
// beta images body.
func (c *call) checkPrompt() bool {
	raw := c.fields.RawPrompt // found by the peek, in its one pass over the body
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		c.fail(&Error{Status: 400, Reason: "prompt_missing", Param: "prompt", Code: "missing_required_parameter",
			Message: "Missing required parameter: 'prompt'."})
		return false
	case raw[0] != '"':
		c.fail(&Error{Status: 400, Reason: "prompt_type", Param: "prompt", Code: "invalid_type",
			Message: "Invalid type for 'prompt': expected a string."})
		return false
	case len(raw) == 2:
		c.fail(&Error{Status: 400, Reason: "prompt_empty", Param: "prompt", Code: "empty_string",
			Message: "Invalid 'prompt': empty string."})
		return false
	}
	return true
}

// generateContent serves POST {base}/{version}/models/{model}:generateContent
// for registered image models with a gamma deployment. The key comes from
// x-gamma-api-key; the body and the answer pass byte for byte (thought
// signatures of multi-turn edits included); x-session-id keeps a
// conversation on one deployment.
func (g *Gateway) generateContent(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Gamma, epGenerateContent)
	defer c.end()
	version, ok := c.gammaVersion()
	if !ok {
		return
	}
	name, ok := c.gammaModel()
	if !ok || !c.authenticateGamma() {
		return
	}
	r := c.gammaRoute(name, groupParam(ctx))
	if r == nil || !c.readBody(c.st.cfg.Limits.MaxImageBodyBytes) || !c.peekBody() {
		return
	}
	if !c.headerSessionKey() {
		return
	}
	var buf [128]byte
	c.version = version
	path := appendGammaPath(buf[:0], version, c.model.id)
	c.forward(r, b2s(path), c.body, true)
}

// gammaVersion returns the {version} segment, which must be v1 or v1beta.
func (c *call) gammaVersion() (string, bool) {
	v, _ := c.ctx.UserValue("version").(string)
	if v == "v1" || v == "v1beta" {
		return v, true
	}
	c.fail(&Error{Status: 404, Reason: "gamma_version",
		Message: "unknown API version '" + v + "': use v1 or v1beta"})
	return "", false
}

// gammaModel splits the {model} segment, "name:method", on its last ':' and
// returns the model name (percent-decoded). Only generateContent is served.
func (c *call) gammaModel() ([]byte, bool) {
	seg, _ := c.ctx.UserValue("model").(string)
	i := strings.LastIndexByte(seg, ':')
	if i < 0 {
		c.fail(&Error{Status: 404, Reason: "gamma_method",
			Message: "unknown path: expected models/{model}:generateContent"})
		return nil, false
	}
	name, method := seg[:i], seg[i+1:]
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		c.fail(&Error{Status: 400, Reason: "gamma_stream",
			Message: "streaming is not supported on this endpoint: call models/{model}:generateContent"})
		return nil, false
	default:
		c.fail(&Error{Status: 404, Reason: "gamma_method",
			Message: "method '" + method + "' is not served: only models/{model}:generateContent is"})
		return nil, false
	}
	if strings.IndexByte(name, '%') < 0 {
		return s2b(name), true
	}
	dec, err := url.PathUnescape(name)
	if err != nil {
		c.fail(&Error{Status: 400, Reason: "gamma_model", Message: "invalid model name in the path", Cause: err})
		return nil, false
	}
	return s2b(dec), true
}

// authenticateGamma checks the platform key in x-gamma-api-key and sets
// keyID. Neither a Bearer header nor x-goog-api-key (which genai always
// sends, with the client's own Gemini key) is a credential here.
func (c *call) authenticateGamma() bool {
	key, twice := credential(&c.ctx.Request.Header, "X-Gamma-Api-Key")
	if twice {
		c.fail(errCredentialTwice("x-gamma-api-key"))
		return false
	}
	if len(key) == 0 {
		if c.certAuthenticate() {
			return true
		}
		msg := "missing API key: send the platform API key in the x-gamma-api-key header"
		if bearerToken(c.ctx) != nil {
			msg = "Authorization: Bearer is not accepted on this endpoint: send the platform API key in the x-gamma-api-key header"
		}
		c.fail(errorf(401, "auth_missing", msg))
		return false
	}
	return c.verifyKey(key, "invalid API key in x-gamma-api-key")
}

// gammaRoute returns the gamma route of an eligible model: a registered image
// model with a gamma deployment (in the group, when one is named). Anything
// else is "not eligible", answered without contacting an upstream.
func (c *call) gammaRoute(name, group []byte) *upstream.Route {
	if len(group) > 0 && c.st.groups[b2s(group)] == nil {
		c.fail(&Error{Status: 404, Reason: "group_unknown", Message: "unknown group '" + string(group) + "'"})
		return nil
	}
	if !c.allowModel(name) {
		return nil
	}
	m, r, ok := c.st.routeFor(name, family.Gamma, group)
	c.group = group
	var why string
	switch {
	case !ok:
		why = "it is not a registered model"
	case !m.image:
		why = "it is not registered as an image model"
	case r == nil && len(group) > 0:
		why = "it has no gamma deployment in group '" + string(group) + "'"
	case r == nil:
		why = "it has no gamma deployment that supplies generateContent"
	default:
		c.model = m
		return r
	}
	c.fail(&Error{Status: 404, Reason: "model_not_eligible",
		Message: "models/" + string(name) + " is not eligible for generateContent: " + why})
	return nil
}

// headerSessionKey takes the x-session-id header, at most maxSessionKey
// characters, as the session key and keeps its hash for the pick. Gamma
// bodies carry no session_id: the header is the only key.
func (c *call) headerSessionKey() bool {
	key := c.ctx.Request.Header.Peek("x-session-id")
	if len(key) > maxSessionKey && utf8.RuneCount(key) > maxSessionKey {
		c.fail(&Error{Status: 400, Reason: "session_too_long", Param: "x-session-id",
			Message: "x-session-id must be at most 256 characters"})
		return false
	}
	c.keepSession(key)
	return true
}

// gammaMediaUnsupported answers Gemini's upload and Files paths: uploading to
// platform Media is not supported from this endpoint.
func (g *Gateway) gammaMediaUnsupported(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Gamma, epOther)
	defer c.end()
	c.fail(&Error{Status: 400, Reason: "gamma_media",
		Message: "uploading to platform Media (the upload and files endpoints) is not supported by this gateway: send images inline as inlineData parts of contents"})
}

// appendGammaPath appends the upstream path /{version}/models/{model}:generateContent,
// the model name escaped as one path segment.
func appendGammaPath(dst []byte, version, model string) []byte {
	dst = append(dst, '/')
	dst = append(dst, version...)
	dst = append(dst, "/models/"...)
	dst = appendPathSegment(dst, model)
	return append(dst, ":generateContent"...)
}

// appendPathSegment appends s percent-encoded as one path segment: every
// byte but the unreserved characters of RFC 3986 is escaped.
func appendPathSegment(dst []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '-' || b == '.' || b == '_' || b == '~' {
			dst = append(dst, b)
			continue
		}
		dst = append(dst, '%', upperHex[b>>4], upperHex[b&0xf])
	}
	return dst
}
