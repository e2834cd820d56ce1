package proxy

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/proxy/rawio"
	"github.com/modelgate/gateway/proxy/spend"
	"github.com/modelgate/gateway/proxy/trace"
	"github.com/modelgate/gateway/proxy/upstream"
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

// call is the state of one client request while it is served, pooled. It is
// acquired by a handler and released when the answer has been written: at the
// end of the handler, or, for a streamed answer, when fasthttp closes the body
// stream (call implements io.ReadCloser for that, see forward.go). A streamed
// answer's call keeps the RequestCtx past its handler, as fasthttp allows a
// body stream to: fasthttp writes that body and closes it before the
// RequestCtx serves another request, and the call lets go of it then. An SSE
// stream written on a hijacked connection lets go of it at the hijack
// instead, before fasthttp frees it (hijack.go, dropRequestCtx): from then on
// c.ctx is nil.
type call struct {
	g      *Gateway
	st     *state
	ctx    *fasthttp.RequestCtx
	family family.Family
	ep     endpoint
	// The call's flags, side by side: apart, each would take eight bytes
	// with its padding (see TestCallFitsItsSizeClass), and a count.
	//
	// inlined: the body to forward is the client's with stored files
	// inlined. bodyDone: the request body was read to its end, or its rest
	// is taken care of (see settleBody). hasSession: the call named a
	// session (sessionHash). sent: the call was sent upstream; reached: its
	// last send may have reached the provider (see chargedTokens). done: a
	// streamed answer owns the call, and Close releases it. recorded: a
	// Responses create's record is written, or cannot be (responses.go).
	// attempts counts the sends of the call, a resend included (see try),
	// in the flags' padding.
	inlined, bodyDone, hasSession bool
	sent, reached, done, recorded bool
	attempts                      int32

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
	status  int
	// shares is the call's share of the request body budget (bodybudget.go).
	shares bodyShares

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
	cause       error     // internal cause of a failure, logged, never shown

	// ticket is the call's hold on its key's rate limits; see limits.go.
	ticket ratelimit.Ticket
	// hold is the call's reservation of its key's budgets, nil unless one
	// applies (pooled apart: most keys have none); spent its cost and
	// reserved what it had reserved, once settled (pico-USD); see spend.go.
	hold            *spend.Hold
	spent, reserved int64
	// trace holds the call's spans; off unless tracing is (see tracing.go).
	trace trace.Call

	// up is the upstream call and the relay of its answer.
	up upstream.Relay

	// watch ends the upstream call through cancel when the client leaves
	// while the call waits on its upstream (see clientconn.Conn.WatchPeer): from
	// the first send until the call is released. client is the client's
	// connection once watched.
	watch  rawio.Watch
	cancel upstream.Cancel
	client *clientconn.Conn

	// onStream, when set, sees every chunk relayed (Responses reads the id).
	onStream func(c *call, p []byte)
	// onAnswer, when set, sees a buffered answer before it is written; false
	// means it answered the client itself.
	onAnswer func(c *call, body []byte) bool

	// Responses: the record of a stored create, nil otherwise (pooled apart:
	// most calls need none), and the model inherited from a previous
	// response. See responses.go.
	record    *responseRecord
	inherited string
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

// clock returns the time now as the call's start plus the time since, which
// time.Since reads from the monotonic clock alone: 32 ns here against 47 for
// time.Now, which reads the wall clock too, and the same durations from
// start. A wall clock stepped during the call does not move it.
func (c *call) clock() time.Time { return c.start.Add(time.Since(c.start)) }

// Request ids: an incoming x-request-id of 1..128 visible ASCII characters is
// kept; otherwise "req_" + 32 hex digits: a random per-process prefix and a
// counter, unique across processes without coordination.
var (
	reqIDPrefix  [8]byte
	reqIDCounter atomic.Uint64
	// reqIDHead is "req_" and reqIDPrefix in hex, written once.
	reqIDHead []byte
)

func init() {
	rand.Read(reqIDPrefix[:])
	reqIDHead = append(reqIDHead, "req_"...)
	for _, b := range reqIDPrefix {
		reqIDHead = append(reqIDHead, hexDigits[b>>4], hexDigits[b&0xf])
	}
}

func appendRequestID(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	if in := ctx.Request.Header.Peek("x-request-id"); validRequestID(in) {
		return append(dst, in...)
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], reqIDCounter.Add(1))
	dst = append(dst, reqIDHead...)
	for _, b := range n {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xf])
	}
	return dst
}

func validRequestID(b []byte) bool {
	if len(b) == 0 || len(b) > 128 {
		return false
	}
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
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
	c.releaseRecord()
	c.inherited, c.recorded = "", false
	c.status = 0
	c.reason, c.cause = "", nil
	c.firstByte, c.bytesOut, c.bodyLen = time.Time{}, 0, 0
	c.sessionHash, c.hasSession = 0, false
	// Ended by finish; a call released without one keeps none.
	c.trace = trace.Call{}
	c.hold = nil // settled and given back by finish; one left here is dropped
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
	c.firstByte = c.clock()
	writeError(c.ctx, c.family, e, c.reqID)
	c.setRequestIDHeader()
}

// settleBody leaves the connection in order when the call answered before
// reading its request body to the end (a refusal): fasthttp would read the
// rest as the next request. A rest of up to clientconn.MaxQuietDrain bytes
// is read and dropped and the connection serves on; a longer one is not
// read: the answer says the connection closes and a lingering close ends it
// (clientconn.CloseAfterAnswer).
func (c *call) settleBody() {
	if c.bodyDone || !c.ctx.Request.IsBodyStream() {
		return
	}
	c.bodyDone = true
	ctx := c.ctx
	if cl := ctx.Request.Header.ContentLength(); cl <= clientconn.MaxQuietDrain && c.drainQuietly(ctx.RequestBodyStream()) {
		return
	}
	clientconn.CloseAfterAnswer(ctx)
}

// drainQuietly reads and drops the rest of the request body from r, and
// reports whether it ended within clientconn.MaxQuietDrain bytes; a chunked body's
// framing is bounded by what that many bytes of body may take.
func (c *call) drainQuietly(r io.Reader) bool {
	c.boundChunked(clientconn.ChunkSlack + clientconn.ChunkCredit*clientconn.MaxQuietDrain)
	n, err := io.CopyN(io.Discard, r, clientconn.MaxQuietDrain+1)
	return err == io.EOF && n <= clientconn.MaxQuietDrain
}

// boundChunked bounds a chunked body's framing at n bytes from here on
// (see clientconn.Conn.BoundChunked) and returns the client connection, to be
// credited the body's bytes as they are read; nil when the body has a
// declared length, which needs no bound.
func (c *call) boundChunked(n int64) *clientconn.Conn {
	if c.ctx.Request.Header.ContentLength() != -1 {
		return nil
	}
	cc, _ := c.ctx.Conn().(*clientconn.Conn)
	if cc != nil {
		cc.BoundChunked(n)
	}
	return cc
}

// chunkedTooLarge reports whether a read of the body failed on the bound of
// its framing.
func (c *call) chunkedTooLarge() bool {
	cc, ok := c.ctx.Conn().(*clientconn.Conn)
	return ok && cc.ChunkedTooLarge()
}

// headerAlphaRequestID is alpha's request id header, as fasthttp writes it
// (headerRequestID is every family's): the names are set without being
// normalized again on every call.
var headerAlphaRequestID = []byte("Request-Id")

func (c *call) setRequestIDHeader() {
	c.ctx.Response.Header.SetCanonical(headerRequestID, c.reqID)
	if c.family == family.Alpha {
		c.ctx.Response.Header.SetCanonical(headerAlphaRequestID, c.reqID)
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
