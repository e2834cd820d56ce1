package proxy

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Intake: everything a call does before an upstream is chosen, in the order
// it does it. A model call (modelCall) authenticates its caller (the
// credential headers and the key are read and verified here), reads the
// request body within the body budget (bodybudget.go), peeks at the fields
// routing needs, takes its session key and resolves its model to a route;
// forward.go then chooses a deployment and takes it from there. The other
// endpoints' handlers take the same steps they need, each in its own file.

// modelCall serves a call routed by the body's model with session affinity:
// messages and chat completions.
func (g *Gateway) modelCall(ctx *fasthttp.RequestCtx, fam family.Family, ep endpoint, path string) {
	c := g.acquireCall(ctx, fam, ep)
	defer c.end()
	if !c.authenticate() || !c.readBody(c.st.cfg.Limits.MaxBodyBytes) || !c.peekBody() {
		return
	}
	if !c.sessionKey() {
		return
	}
	r := c.routeModel(groupParam(ctx))
	if r == nil {
		return
	}
	body, ok := c.prepareBody()
	if !ok {
		return
	}
	c.forward(r, path, body, c.fields.Stream)
}

// authenticate checks the Bearer key (alpha also takes x-api-key, as its SDKs
// send it by default) and sets keyID.
func (c *call) authenticate() bool {
	h := &c.ctx.Request.Header
	auth, twice := credential(h, fasthttp.HeaderAuthorization)
	if twice {
		c.fail(errCredentialTwice(fasthttp.HeaderAuthorization))
		return false
	}
	key := bearerOf(auth)
	if c.family == family.Alpha {
		apiKey, twice := credential(h, "X-Api-Key")
		switch {
		case twice:
			c.fail(errCredentialTwice("x-api-key"))
			return false
		case key == nil:
			key = apiKey
		case len(apiKey) > 0 && !bytes.Equal(apiKey, key):
			c.fail(errorf(400, "credential_twice", "the request has two different keys, in Authorization and in x-api-key"))
			return false
		}
	}
	if len(key) == 0 {
		if c.certAuthenticate() {
			return true
		}
		c.fail(errorf(401, "auth_missing", "missing API key: send Authorization: Bearer <key>"))
		return false
	}
	return c.verifyKey(key, "invalid API key")
}

// verifyKey checks a non-empty caller key against the snapshot in force (or the
// Verifier of the options) and sets keyID and access, or answers 401 with invalid as the
// message. A key that is blocked or past its expiry is told so.
func (c *call) verifyKey(key []byte, invalid string) bool {
	if v := c.st.keys; v != nil {
		id, ok := v.Verify(key)
		if !ok {
			c.fail(c.keyRefused("auth_invalid", invalid))
			return false
		}
		c.keyID = id
		return true
	}
	e, verdict := c.g.keys.Load().Lookup(key, c.start.UnixNano())
	switch verdict {
	case keys.Valid:
		c.keyID, c.access = e.ID, e.Models
		return true
	case keys.Blocked:
		c.fail(c.keyRefused("auth_blocked", "this API key is blocked"))
	case keys.Expired:
		c.fail(c.keyRefused("auth_expired", "this API key has expired"))
	default:
		c.fail(c.keyRefused("auth_invalid", invalid))
	}
	return false
}

// keyRefused is the 401 of a key that does not authenticate, reason saying how and msg
// what. The beta family's is OpenAI's: code invalid_api_key and "Incorrect API key
// provided" first in the message, which, like every family's, never quotes the key.
func (c *call) keyRefused(reason, msg string) *Error {
	e := errorf(401, reason, msg)
	if c.family == family.Beta {
		e.Code = "invalid_api_key"
		e.Message = "Incorrect API key provided: " + msg + "; check the key this gateway issued you."
	}
	return e
}

// allowModel refuses, 403 in the family's shape, a model the caller's key may not use.
func (c *call) allowModel(name []byte) bool {
	if c.access.Allows(name) {
		return true
	}
	c.fail(&Error{Status: 403, Reason: "model_forbidden", Param: "model", Code: "model_not_allowed",
		Message: "this API key may not use the model '" + string(name) + "'"})
	return false
}

var bearerPrefix = []byte("bearer ")

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(ctx *fasthttp.RequestCtx) []byte {
	return bearerOf(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
}

// bearerOf returns the token of an Authorization value "Bearer <token>".
func bearerOf(v []byte) []byte {
	if len(v) <= len(bearerPrefix) || !bytes.EqualFold(v[:len(bearerPrefix)], bearerPrefix) {
		return nil
	}
	return bytes.TrimSpace(v[len(bearerPrefix):])
}

// credential returns the value of the credential header name, and whether
// the request has it more than once. A proxy in front may read another of
// the copies than the gateway, which takes the first: such a request is
// refused rather than billed to one key and seen as another's.
func credential(h *fasthttp.RequestHeader, name string) (v []byte, twice bool) {
	all := h.PeekAll(name)
	if len(all) == 0 {
		return nil, false
	}
	return all[0], len(all) > 1
}

// errCredentialTwice is the answer to a credential header sent twice.
func errCredentialTwice(name string) *Error {
	return errorf(400, "credential_twice", "the request has more than one "+name+" header")
}

var errBodyRead = errors.New("cannot read request body")

// readBody reads the whole request body, refusing more than limit bytes with
// 413 before reading past the limit.
func (c *call) readBody(limit int) bool {
	req := &c.ctx.Request
	cl := req.Header.ContentLength()
	if cl > limit {
		c.fail(bodyTooLarge(limit))
		return false
	}
	if !c.reserveUpTo(cl) {
		return false
	}
	c.body = orSpare(c.body) // the call's may have gone with a stream (see dropBodies)
	if !req.IsBodyStream() {
		if !c.reserveUpTo(len(req.Body())) {
			return false
		}
		c.body = append(c.body[:0], req.Body()...)
		if len(c.body) > limit {
			c.fail(bodyTooLarge(limit))
			return false
		}
		return true
	}
	return c.readBodyStream(limit, cl)
}

// readBodyStream reads a streamed request body of declared length cl (-1 for
// a chunked one) into c.body, as readBody says.
func (c *call) readBodyStream(limit, cl int) bool {
	buf := c.body[:0]
	if cl >= 0 {
		// The declared length at once, and a byte to see the end: a
		// growing buffer would hold up to twice the body, half of it garbage.
		buf = slices.Grow(buf, cl+1)
	}
	r := c.ctx.RequestBodyStream()
	cc := c.boundChunked(clientconn.ChunkSlack)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
			if !c.reserveUpTo(cap(buf)) {
				c.body = buf
				return false
			}
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if cc != nil {
			cc.CreditChunked(n)
		}
		if len(buf) > limit {
			c.body = buf
			c.fail(bodyTooLarge(limit))
			return false
		}
		if err == io.EOF {
			c.bodyDone = true
			break
		}
		if err != nil {
			c.body = buf
			if c.chunkedTooLarge() {
				c.fail(chunkFramingTooLarge())
				return false
			}
			c.fail(&Error{Status: 400, Message: errBodyRead.Error(), Reason: "body_read", Cause: redacted{err}})
			return false
		}
	}
	c.body = buf
	return true
}

func chunkFramingTooLarge() *Error {
	return &Error{Status: 413, Reason: "chunk_framing_too_large",
		Message: "the chunked body's size lines and extensions are larger than allowed: " +
			strconv.Itoa(clientconn.ChunkSlack) + " bytes, and " + strconv.Itoa(clientconn.ChunkCredit) + " for each byte of body"}
}

func bodyTooLarge(limit int) *Error {
	return &Error{Status: 413, Reason: "body_too_large",
		Message: "request body is larger than the limit of " + strconv.Itoa(limit) + " bytes"}
}

// peekBody parses the routing fields of a JSON body, and reserves the copy
// the body needs in the budget.
func (c *call) peekBody() bool {
	if err := parse.Peek(c.body, &c.fields); err != nil {
		e := &Error{Status: 400, Reason: "bad_json", Message: "invalid request body: " + err.Error(), Cause: err}
		if de := (*parse.DuplicateFieldError)(nil); errors.As(err, &de) {
			e.Reason, e.Param = "duplicate_field", de.Field
		}
		c.fail(e)
		return false
	}
	// The body goes upstream without session_id: a copy (bodyWithoutSessionID).
	return !c.fields.HasSessionID() || c.reserveShare(&c.shares.spliced, len(c.body))
}

// maxSessionKey is the longest session key, in characters, that is accepted.
const maxSessionKey = 256

// sessionKey takes the session key, the body's session_id, else the
// x-session-id header, and keeps its hash for the pick. Longer than
// maxSessionKey characters is refused.
func (c *call) sessionKey() bool {
	key := c.fields.SessionID
	src := "session_id"
	if len(key) == 0 {
		key = c.ctx.Request.Header.Peek("x-session-id")
		src = "x-session-id"
	}
	if len(key) > maxSessionKey && utf8.RuneCount(key) > maxSessionKey {
		c.fail(&Error{Status: 400, Reason: "session_too_long", Param: src,
			Message: src + " must be at most 256 characters"})
		return false
	}
	c.keepSession(key)
	return true
}

// keepSession hashes the session key once, for the pick and the access log;
// an empty key is no session.
func (c *call) keepSession(key []byte) {
	if len(key) > 0 {
		c.sessionHash, c.hasSession = affinity.Hash(key), true
	}
}

// routeModel resolves the body's model to its route in the call's family.
func (c *call) routeModel(group []byte) *upstream.Route {
	if len(c.fields.Model) == 0 {
		c.fail(&Error{Status: 400, Reason: "model_missing", Param: "model", Message: "model is required"})
		return nil
	}
	return c.routeNamed(c.fields.Model, group)
}

func (c *call) routeNamed(name, group []byte) *upstream.Route {
	if !c.allowModel(name) {
		return nil
	}
	m, r, ok := c.st.routeFor(name, c.family, group)
	c.group = group
	if !ok {
		c.fail(&Error{Status: 404, Reason: "model_unknown", Param: "model", Code: "model_not_found",
			Message: "the model '" + string(name) + "' does not exist or you do not have access to it"})
		return nil
	}
	c.model = m
	if r == nil {
		msg := "the model '" + string(name) + "' is not served on the " + c.family.String() + " endpoints"
		if len(group) > 0 {
			msg += " of group '" + string(group) + "'"
		}
		c.fail(&Error{Status: 404, Reason: "model_no_route", Param: "model", Code: "model_not_found", Message: msg})
		return nil
	}
	return r
}

// groupParam returns the {group} path segment, or nil.
func groupParam(ctx *fasthttp.RequestCtx) []byte {
	if v, ok := ctx.UserValue("group").(string); ok {
		return s2b(v)
	}
	return nil
}

// prepareBody returns the body to forward. Alpha messages that reference
// stored files get them inlined; every body loses session_id.
func (c *call) prepareBody() ([]byte, bool) {
	if c.ep == epMessages && c.g.hasFileRefs(c.body) {
		c.inlined = true
		return c.g.inlineFiles(c)
	}
	return c.bodyWithoutSessionID(), true
}

// bodyWithoutSessionID returns the body to forward: the client's bytes, with
// session_id cut out when present.
func (c *call) bodyWithoutSessionID() []byte {
	if !c.fields.HasSessionID() {
		return c.body
	}
	// Grown at once to what peekBody reserved, the copy takes no more.
	c.spliced = parse.AppendWithoutSessionID(slices.Grow(orSpare(c.spliced), len(c.body)), c.body, &c.fields)
	return c.spliced
}
