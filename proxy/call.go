package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/proxy/rawio"
	"github.com/modelgate/gateway/proxy/spend"
	"github.com/modelgate/gateway/proxy/trace"
	"github.com/modelgate/gateway/proxy/upstream"
	"github.com/modelgate/gateway/store"
)

// endpoint names a client-facing endpoint, for errors, metrics and logs.
type endpoint uint8

const (
	epMessages endpoint = iota
	epChat
	epModels
	epResponsesCreate
	epResponsesGet
	epResponsesDelete
	epResponsesInputItems
	epResponsesInputTokens
	epResponsesCompact
	epImages
	epGenerateContent
	epFilesUpload
	epFilesList
	epFilesGet
	epFilesContent
	epFilesDelete
	epBetaFilesList
	epOther
	numEndpoints
)

var endpointNames = [numEndpoints]string{
	"messages", "chat_completions", "models", "responses_create", "responses_get",
	"responses_delete", "responses_input_items", "responses_input_tokens", "responses_compact",
	"images_generations", "generate_content", "files_upload", "files_list", "files_get",
	"files_content", "files_delete", "beta_files_list", "other",
}

func (e endpoint) String() string { return endpointNames[e] }

// maxSessionKey is the longest session key, in characters, that is accepted.
const maxSessionKey = 256

// call is the state of one client request while it is served, pooled. It is
// acquired by a handler and released when the answer has been written: at the
// end of the handler, or, for a streamed answer, when fasthttp closes the body
// stream (call implements io.ReadCloser for that). A call never keeps the
// RequestCtx past its handler.
type call struct {
	g       *Gateway
	st      *state
	ctx     *fasthttp.RequestCtx
	family  family.Family
	ep      endpoint
	keyID   string
	access  *keys.Models // the models the key may use; nil all (see callerkeys.go)
	fields  parse.Fields
	model   *model
	dep     *upstream.Deployment
	start   time.Time
	reqID   []byte
	body    []byte // the request body read from the client, or its spliced copy
	bodyLen int    // len(body) when a streamed answer began (body may be dropped then)
	spliced []byte
	renamed []byte // the body with a deployment's own model name; see send
	version string // the gamma path's {version}, for a deployment's own model name
	inlined bool   // the body to forward is the client's with stored files inlined
	status  int
	// shares is the call's share of the request body budget (budget.go).
	shares bodyShares
	// bodyDone: the request body was read to its end, or its rest is taken
	// care of (see settleBody).
	bodyDone bool

	// asked is the model the client named, once the call fell back to
	// another (nil before); nextFallback indexes asked.fallbacks; group is
	// the routing group of the call's base, if any. See fallback.go.
	asked        *model
	nextFallback int
	group        []byte

	// What the access log and metrics read when the call finishes.
	reason      string    // why the gateway rejected the call ("" when it did not)
	firstByte   time.Time // when the first answer byte was ready (a stream's: up.FirstByte)
	bytesOut    int64     // answer body bytes written (a stream's: up.Sent)
	sessionHash uint64    // affinity.Hash of the session key, when there was one
	hasSession  bool
	cause       error // internal cause of a failure, logged, never shown

	// ticket is the call's hold on its key's rate limits; see limits.go.
	ticket ratelimit.Ticket
	// hold is the call's reservation of its key's budgets; spent its cost
	// and reserved what it had reserved, once settled (pico-USD); see spend.go.
	hold            spend.Hold
	spent, reserved int64
	// sent: the call was sent upstream; reached: its last send may have
	// reached the provider (see chargedTokens).
	sent, reached bool
	// trace holds the call's spans; off unless tracing is (see tracing.go).
	trace trace.Call

	// up is the upstream call and the relay of its answer.
	up       upstream.Relay
	attempts int  // sends of the call, a resend included (see try)
	done     bool // a streamed answer owns the call: Close releases it

	// watch ends the upstream call through cancel when the client leaves
	// while the call waits on its upstream (see clientConn.watchPeer): from
	// the first send until the call is released. client is the client's
	// connection once watched.
	watch  rawio.Watch
	cancel upstream.Cancel
	client *clientConn

	// onStream, when set, sees every chunk relayed (Responses reads the id).
	onStream func(c *call, p []byte)
	// onAnswer, when set, sees a buffered answer before it is written; false
	// means it answered the client itself.
	onAnswer func(c *call, body []byte) bool

	// Responses: the ownership record to write, the model inherited from a
	// previous response, and the scan of a stream for the response id.
	owned     store.Response
	inherited string
	recorded  bool
	scanner   parse.Scanner
	idBuf     []byte
}

var callPool = sync.Pool{New: func() any { return new(call) }}

func (g *Gateway) acquireCall(ctx *fasthttp.RequestCtx, fam family.Family, ep endpoint) *call {
	c := callPool.Get().(*call)
	c.g = g
	c.st = g.state.Load()
	c.ctx = ctx
	c.family = fam
	c.ep = ep
	// The server reads the clock just before the handler: the call's start
	// is that reading, not one more (a ctx made by hand has none).
	if c.start = ctx.Time(); c.start.IsZero() {
		c.start = time.Now()
	}
	c.reqID = appendRequestID(c.reqID[:0], ctx)
	c.traceStart()
	return c
}

const (
	maxPooledBody = 1 << 20
	// maxHeldBody bounds the request body buffers a streamed answer keeps.
	maxHeldBody = 16 << 10
)

func (c *call) release() {
	c.watch.Stop() // before anything of the call is reset: no Cancel comes after
	c.cancel.Reset()
	c.client = nil
	c.releaseBody()
	c.fields.Reset()
	c.up.Reset()
	c.g, c.st, c.ctx, c.model, c.dep = nil, nil, nil, nil, nil
	c.asked, c.nextFallback, c.group = nil, 0, nil
	c.keyID, c.access = "", nil
	c.done, c.bodyDone, c.attempts = false, false, 0
	c.sent, c.reached = false, false
	c.onStream, c.onAnswer = nil, nil
	c.owned, c.inherited, c.recorded = store.Response{}, "", false
	c.status = 0
	c.reason, c.cause = "", nil
	c.firstByte, c.bytesOut, c.bodyLen = time.Time{}, 0, 0
	c.sessionHash, c.hasSession = 0, false
	// Ended by finish; a call released without one keeps none.
	c.trace = trace.Call{}
	c.scanner.Reset(0) // lets go of an event past the Scanner's bound
	if cap(c.body) > maxPooledBody {
		c.body = nil
	}
	if cap(c.spliced) > maxPooledBody {
		c.spliced = nil
	}
	if cap(c.renamed) > maxPooledBody {
		c.renamed = nil
	}
	c.spliced, c.renamed, c.version, c.inlined = c.spliced[:0], c.renamed[:0], "", false
	c.body = c.body[:0] // a call that reads no body must not see the last one's
	callPool.Put(c)
}

// fail answers e in the call's family shape.
func (c *call) fail(e *Error) {
	if e.Status == statusClientGone {
		c.ctx.SetConnectionClose()
	}
	c.status = e.Status
	c.reason, c.cause = e.Reason, e.Cause
	c.firstByte = time.Now()
	writeError(c.ctx, c.family, e, c.reqID)
	c.setRequestIDHeader()
}

// settleBody leaves the connection in order when the call answered before
// reading its request body to the end (a refusal): fasthttp would read the
// rest as the next request. A rest of up to maxQuietDrain bytes is read and
// dropped and the connection serves on; a longer one is not read: the answer
// says the connection closes and lingerClose ends it.
func (c *call) settleBody() {
	if c.bodyDone || !c.ctx.Request.IsBodyStream() {
		return
	}
	c.bodyDone = true
	ctx := c.ctx
	if cl := ctx.Request.Header.ContentLength(); cl <= maxQuietDrain && c.drainQuietly(ctx.RequestBodyStream()) {
		return
	}
	closeAfterAnswer(ctx)
}

// drainQuietly reads and drops the rest of the request body from r, and
// reports whether it ended within maxQuietDrain bytes; a chunked body's
// framing is bounded by what that many bytes of body may take.
func (c *call) drainQuietly(r io.Reader) bool {
	c.boundChunked(chunkSlack + chunkCredit*maxQuietDrain)
	n, err := io.CopyN(io.Discard, r, maxQuietDrain+1)
	return err == io.EOF && n <= maxQuietDrain
}

// boundChunked bounds a chunked body's framing at n bytes from here on
// (see clientConn.boundChunked) and returns the client connection, to be
// credited the body's bytes as they are read; nil when the body has a
// declared length, which needs no bound.
func (c *call) boundChunked(n int64) *clientConn {
	if c.ctx.Request.Header.ContentLength() != -1 {
		return nil
	}
	cc, _ := c.ctx.Conn().(*clientConn)
	if cc != nil {
		cc.boundChunked(n)
	}
	return cc
}

// chunkedTooLarge reports whether a read of the body failed on the bound of
// its framing.
func (c *call) chunkedTooLarge() bool {
	cc, ok := c.ctx.Conn().(*clientConn)
	return ok && cc.chunkedTooLarge()
}

// closeAfterAnswer ends the connection after the answer with lingerClose.
// The answer says the connection closes, so no client sends another request
// into the drain; fasthttp would close at once on such an answer, so the
// connection is hijacked and the answer written here.
func closeAfterAnswer(ctx *fasthttp.RequestCtx) {
	ctx.Response.SetConnectionClose()
	answer := []byte(ctx.Response.String())
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if _, err := c.Write(answer); err == nil {
			lingerClose(c)
		}
	})
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

// verifyKey checks a non-empty caller key and sets keyID, or answers 401
// with invalid as the message.
func (c *call) verifyKey(key []byte, invalid string) bool {
	return c.verifyCaller(key, invalid)
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
	buf := c.body[:0]
	if cl >= 0 {
		// The declared length at once, and a byte to see the end: a
		// growing buffer would hold up to twice the body, half of it garbage.
		buf = slices.Grow(buf, cl+1)
	}
	r := c.ctx.RequestBodyStream()
	cc := c.boundChunked(chunkSlack)
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
			cc.creditChunked(n)
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
			strconv.Itoa(chunkSlack) + " bytes, and " + strconv.Itoa(chunkCredit) + " for each byte of body"}
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

// bodyWithoutSessionID returns the body to forward: the client's bytes, with
// session_id cut out when present.
func (c *call) bodyWithoutSessionID() []byte {
	if !c.fields.HasSessionID() {
		return c.body
	}
	// Grown at once to what peekBody reserved, the copy takes no more.
	c.spliced = parse.AppendWithoutSessionID(slices.Grow(c.spliced[:0], len(c.body)), c.body, &c.fields)
	return c.spliced
}

// forwardTo sends the request to one given deployment (the one that holds a
// Responses object) and relays the answer; see try.
func (c *call) forwardTo(dep *upstream.Deployment, path string, body []byte, stream bool) {
	if !c.reserveRenamed(body) || !c.admit() {
		return
	}
	c.try(nil, -1, dep, path, body, stream)
}

// send makes the upstream call; on success the deployment's in-flight count
// stays raised until the answer is relayed.
func (c *call) send(dep *upstream.Deployment, path string, body []byte, stream bool) error {
	c.dep = dep
	ask := stream && c.asksUsage()
	pm, renamed := c.providerModel(dep)
	if renamed {
		var err error
		if path, body, err = c.rename(pm, path, body, ask); err != nil {
			return err
		}
	}
	if ask && !renamed {
		c.renamed = parse.AppendAskingUsage(c.renamed[:0], c.body, &c.fields, nil)
		body = c.renamed
	}
	c.traceAttempt(dep)
	req := upstream.AcquireRequest()
	req.Head = c.appendHead(req.Head, dep, path, len(body))
	req.Body = body
	req.Cancel = &c.cancel
	c.watchClient()
	if c.countsUsage() {
		c.up.CountUsage()
	}
	if ask {
		c.up.StripUsage()
	}
	c.sent = true
	err := c.up.Send(dep, req, stream)
	c.reached = err == nil || !upstream.IsDialError(err)
	// The request is written whole by the time Send returns; a long stream
	// should not keep its head alive.
	upstream.ReleaseRequest(req)
	return err
}

// rename gives the path and body for a deployment that knows the call's model
// as pm: the model's value in the body replaced (a body without a model, such
// as a continuation's, gets none added), or the gamma path rebuilt. ask: the
// body also asks for its stream's usage (see asksUsage).
func (c *call) rename(pm providerModel, path string, body []byte, ask bool) (string, []byte, error) {
	switch {
	case c.ep == epGenerateContent:
		c.renamed = appendGammaPath(c.renamed[:0], c.version, pm.name)
		return b2s(c.renamed), body, nil
	case ask:
		c.renamed = parse.AppendAskingUsage(c.renamed[:0], c.body, &c.fields, pm.json)
		return path, c.renamed, nil
	case len(body) == 0 || c.fields.Model == nil:
		return path, body, nil
	case !c.inlined:
		// The client's body, with or without its session_id: both come from one pass.
		// Grown at once to what reserveRenamed reserved, the copy takes no more.
		c.renamed = parse.AppendForUpstream(slices.Grow(c.renamed[:0], c.shares.renamed), c.body, &c.fields, pm.json)
		return path, c.renamed, nil
	}
	// Another body (alpha messages with inlined files): find its model first.
	var f parse.Fields
	if err := parse.Peek(body, &f); err != nil {
		return path, body, errRename
	}
	c.renamed = parse.AppendForUpstream(slices.Grow(c.renamed[:0], c.shares.renamed), body, &f, pm.json)
	return path, c.renamed, nil
}

// errRename is a body the gateway built that it cannot read back: a bug.
var errRename = errors.New("proxy: cannot put the deployment's model name in the body")

// upstreamError maps a failed upstream call to the client's error. Its cause
// is redacted: fasthttp's text for an answer it could not parse quotes the
// answer's bytes.
func upstreamError(err error) *Error {
	if errors.Is(err, upstream.ErrCanceled) {
		return errClientGone(err)
	}
	if errors.Is(err, fasthttp.ErrNoFreeConns) {
		return &Error{Status: 503, Reason: "upstream_busy", RetryAfter: 1, Cause: err,
			Message: "busy: every connection to the upstream provider is in use; retry shortly"}
	}
	if errors.Is(err, upstream.ErrAnswerTooLarge) {
		return &Error{Status: 502, Reason: "upstream_too_large", Cause: err,
			Message: "the upstream answer is larger than the gateway's limit"}
	}
	if errors.Is(err, fasthttp.ErrTimeout) || upstream.IsTimeout(err) {
		return &Error{Status: 504, Reason: "upstream_timeout", Message: "the upstream provider did not answer in time", Cause: redacted{err}}
	}
	if errors.Is(err, errRename) {
		return &Error{Status: 500, Reason: "rename_error", Message: "the gateway could not prepare the upstream request", Cause: err}
	}
	return &Error{Status: 502, Reason: "upstream_error", Message: "the upstream provider failed to answer", Cause: redacted{err}}
}

// statusClientGone is the status a call that its client left ends with, in
// the access log and metrics (nginx's and Caddy's 499).
const statusClientGone = 499

// errClientGone is the end of a call whose client left before its answer:
// no client reads it.
func errClientGone(cause error) *Error {
	return &Error{Status: statusClientGone, Reason: "client_gone", Cause: cause,
		Message: "the client closed the connection before the answer"}
}

// watchClient has the client's leaving cancel the upstream call (see
// clientConn.watchPeer), once per call: every send of a failover shares the
// watch, which ends when the call is released.
func (c *call) watchClient() {
	if c.client != nil {
		return
	}
	if cc, ok := c.ctx.Conn().(*clientConn); ok {
		c.client = cc
		cc.watchPeer(&c.watch, &c.cancel)
	}
}

// noteClientGone makes the outcome of a call whose client left before its
// answer was relayed whole a 499, whatever the upstream answered: the watch
// canceled the upstream call, or a write to the client failed.
func (c *call) noteClientGone() {
	if c.client == nil || c.status == statusClientGone {
		return
	}
	if c.cancel.Canceled() || c.client.writeFailed.Load() {
		c.status, c.reason, c.cause = statusClientGone, "client_gone", nil
	}
}

// appendHead appends the head of the upstream request to path on dep with a
// body of bodyLen bytes: the request line to the deployment's URL (with the
// client's query string only where forwardQuery says), the client's
// end-to-end headers as the server read them but the stripped ones, the
// deployment's credentials, the request id and the body's length.
func (c *call) appendHead(dst []byte, dep *upstream.Deployment, path string, bodyLen int) []byte {
	h := &c.ctx.Request.Header
	var query []byte
	if c.forwardQuery() {
		query = c.ctx.URI().QueryString()
	}
	dst = dep.AppendRequestLine(dst, h.Method(), path, query)
	headers := len(dst)
	dst, versioned, hopByHop := appendClientHeaders(dst, h, false)
	if hopByHop {
		// Rare: the client's Connection header names headers of its own
		// (upstream.ConnectionOptions). They are written again without those.
		dst, versioned, _ = appendClientHeaders(dst[:headers], h, true)
	}
	dst = dep.AppendCredentials(dst, versioned)
	dst = upstream.AppendHeader(dst, headerRequestID, c.reqID)
	if c.trace.On() {
		dst = c.trace.AppendContext(dst)
	}
	return upstream.EndHead(dst, h.Method(), bodyLen)
}

var headerRequestID = []byte("X-Request-Id")

// appendClientHeaders appends the client's headers but the stripped ones,
// and, when dropNamed is set, those its Connection headers name. It reports
// whether the client sent an anthropic-version (an empty one is dropped), and whether its Connection
// header names any headers (see upstream.ConnectionOptions).
func appendClientHeaders(dst []byte, h *fasthttp.RequestHeader, dropNamed bool) (_ []byte, versioned, hopByHop bool) {
	for name, value := range h.All() {
		if strippedRequestHeader(name) {
			hopByHop = hopByHop || string(name) == "Connection" && upstream.ConnectionOptions(value)
			continue
		}
		if dropNamed && namedByConnection(h, name) {
			continue
		}
		if string(name) == "Anthropic-Version" {
			if len(value) == 0 {
				continue // counts as none: the deployment's default goes instead
			}
			versioned = true
		}
		dst = upstream.AppendHeader(dst, name, value)
	}
	return dst, versioned, hopByHop
}

// namedByConnection reports whether one of the client's Connection headers
// names the header name, which is then hop-by-hop.
func namedByConnection(h *fasthttp.RequestHeader, name []byte) bool {
	for conn, list := range h.All() {
		if string(conn) == "Connection" && upstream.NamedIn(list, name) {
			return true
		}
	}
	return false
}

// forwardQuery reports whether the client's query string goes upstream: on
// the Responses reads, exactly as encoded; elsewhere it is the gateway's own
// (such as the ?beta=true the alpha SDK adds) and is dropped.
func (c *call) forwardQuery() bool {
	return c.ep == epResponsesGet || c.ep == epResponsesInputItems
}

// strippedRequestHeaders never reach an upstream: the client's credentials,
// the gateway's own headers, hop-by-hop headers, encodings the gateway would
// have to undo, and the framing and Host, which are the upstream request's
// own.
var strippedRequestHeaders = [][]byte{
	[]byte("Authorization"), []byte("X-Api-Key"), []byte("X-Goog-Api-Key"), []byte("X-Gamma-Api-Key"),
	[]byte("X-Session-Id"), []byte("X-Request-Id"), []byte("Request-Id"),
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("Proxy-Authorization"),
	[]byte("Te"), []byte("Trailer"), []byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Expect"),
	[]byte("Accept-Encoding"), []byte("Cookie"), []byte("Alpha-Workspace-Id"),
	[]byte("Content-Length"), []byte("Host"),
}

// strippedByLen lists the names of strippedRequestHeaders by their length.
var strippedByLen = func() (t [24][][]byte) {
	for _, h := range strippedRequestHeaders {
		t[len(h)] = append(t[len(h)], h)
	}
	return t
}()

// strippedRequestHeader reports whether name is one of
// strippedRequestHeaders, as the server canonicalised it.
func strippedRequestHeader(name []byte) bool {
	if len(name) >= len(strippedByLen) {
		return false
	}
	for _, h := range strippedByLen[len(name)] {
		if string(h) == string(name) {
			return true
		}
	}
	return false
}

// relay writes the upstream answer to the client: headers at once, then the
// body, buffered when it was read whole, else streamed by the relay.
func (c *call) relay() {
	out := &c.ctx.Response
	if err := c.up.Load(out, c.st.cfg.Limits.MaxResponseBytes, c.onAnswer != nil); err != nil {
		c.fail(upstreamError(err))
		return
	}
	c.begin(out)
	c.setRequestIDHeader()
	c.setServedModel()
	if !c.up.Streamed() {
		body := out.Body()
		if c.onAnswer != nil && !c.onAnswer(c, body) {
			return
		}
		c.firstByte = time.Now()
		c.bytesOut = int64(len(body))
		return
	}
	c.dropLargeBodies()
	var tap upstream.Tap
	if c.onStream != nil {
		tap = c
	}
	size := c.up.Stream(out, c.family, c.ep == epResponsesCreate, tap)
	if cc, ok := c.ctx.Conn().(*clientConn); ok {
		c.up.SetTail(cc)
	}
	c.done = true // ownership passes to the body stream: Close releases the call
	c.g.streamStarted(c)
	out.SetBodyStream(c, size)
}

// dropLargeBodies lets go of the request body's copies past maxHeldBody once
// the request is sent: a stream may last minutes, and should not hold a large
// prompt it no longer needs. Small ones stay with the pooled call. The
// peeked fields point into the body: they go with it.
func (c *call) dropLargeBodies() {
	c.bodyLen = len(c.body)
	if cap(c.body) > maxHeldBody {
		c.body = nil
		c.fields.Reset()
		c.releaseShare(&c.shares.body)
	}
	if cap(c.spliced) > maxHeldBody {
		c.spliced = nil
		c.releaseShare(&c.shares.spliced)
	}
	if cap(c.renamed) > maxHeldBody {
		c.renamed = nil
		c.releaseShare(&c.shares.renamed)
	}
}

// begin copies the answer's status and headers to out: a stream's and a
// small whole answer's through the client's connection (see splice.go), a
// larger one's header by header.
func (c *call) begin(out *fasthttp.Response) {
	if c.up.Streamed() || len(out.Body()) <= spliceMaxBody {
		if cc, ok := c.ctx.Conn().(*clientConn); ok {
			if lines := cc.takeSplice(); lines != nil {
				var ok bool
				c.status, lines, ok = c.up.BeginLines(out, lines, spliceName, spliceValue)
				cc.tookSplice(lines, ok)
				return
			}
		}
	}
	c.status = c.up.Begin(out)
}

func (c *call) setRequestIDHeader() {
	c.ctx.Response.Header.SetBytesV("X-Request-Id", c.reqID)
	if c.family == family.Alpha {
		c.ctx.Response.Header.SetBytesV("Request-Id", c.reqID)
	}
}

// end finishes a call that answered within its handler.
func (c *call) end() {
	if c.done {
		return
	}
	c.settleBody()
	c.g.finish(c)
	c.release()
}
