package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/parse"
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
	family  Family
	ep      endpoint
	keyID   string
	fields  parse.Fields
	model   *model
	dep     *deployment
	start   time.Time
	reqID   []byte
	body    []byte // the request body read from the client, or its spliced copy
	bodyLen int    // len(body) when a streamed answer began (body may be dropped then)
	spliced []byte
	url     []byte
	status  int

	// What the access log and metrics read when the call finishes.
	reason      string    // why the gateway rejected the call ("" when it did not)
	firstByte   time.Time // when the first answer byte was ready for the client
	bytesOut    int64     // answer body bytes relayed
	sessionHash uint64    // affinity.Hash of the session key, when there was one
	hasSession  bool
	cause       error // internal cause of a failure, logged, never shown

	// resp is the upstream answer; the upstream request is pooled apart (see
	// send), so an open stream does not hold it.
	resp fasthttp.Response

	// relay state, while a streamed answer is copied to the client
	stream    io.Reader
	sse       bool
	fixedSize bool
	heads     eventHeads
	ssePeek   [ssePeekSize]byte // an SSE relay's idle read; see WriteTo
	peek      upstreamPeek      // into the upstream's read buffer, when canPeek
	canPeek   bool
	pending   []byte // an error frame still to be written
	streamErr bool
	done      bool
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

func (g *Gateway) acquireCall(ctx *fasthttp.RequestCtx, fam Family, ep endpoint) *call {
	c := callPool.Get().(*call)
	c.g = g
	c.st = g.state.Load()
	c.ctx = ctx
	c.family = fam
	c.ep = ep
	c.start = time.Now()
	c.reqID = appendRequestID(c.reqID[:0], ctx)
	return c
}

const (
	maxPooledBody = 1 << 20
	// maxHeldBody bounds the request body buffers a streamed answer keeps.
	maxHeldBody = 16 << 10
)

func (c *call) release() {
	c.fields.Reset()
	c.resp.Reset()
	c.g, c.st, c.ctx, c.model, c.dep = nil, nil, nil, nil, nil
	c.keyID = ""
	c.stream = nil
	c.sse, c.fixedSize, c.streamErr, c.done = false, false, false, false
	c.heads = eventHeads{}
	c.peek, c.canPeek = upstreamPeek{}, false
	c.pending = c.pending[:0]
	c.onStream, c.onAnswer = nil, nil
	c.owned, c.inherited, c.recorded = store.Response{}, "", false
	c.status = 0
	c.reason, c.cause = "", nil
	c.firstByte, c.bytesOut, c.bodyLen = time.Time{}, 0, 0
	c.sessionHash, c.hasSession = 0, false
	if cap(c.body) > maxPooledBody {
		c.body = nil
	}
	if cap(c.spliced) > maxPooledBody {
		c.spliced = nil
	}
	c.body = c.body[:0] // a call that reads no body must not see the last one's
	callPool.Put(c)
}

// fail answers e in the call's family shape.
func (c *call) fail(e *Error) {
	c.status = e.Status
	c.reason, c.cause = e.Reason, e.Cause
	c.firstByte = time.Now()
	writeError(c.ctx, c.family, e, c.reqID)
	c.setRequestIDHeader()
}

// authenticate checks the Bearer key (alpha also takes x-api-key, as its SDKs
// send it by default) and sets keyID.
func (c *call) authenticate() bool {
	key := bearerToken(c.ctx)
	if key == nil && c.family == Alpha {
		key = c.ctx.Request.Header.Peek("x-api-key")
	}
	if len(key) == 0 {
		c.fail(errorf(401, "auth_missing", "missing API key: send Authorization: Bearer <key>"))
		return false
	}
	return c.verifyKey(key, "invalid API key")
}

// verifyKey checks a non-empty caller key and sets keyID, or answers 401
// with invalid as the message.
func (c *call) verifyKey(key []byte, invalid string) bool {
	id, ok := c.st.keys.Verify(key)
	if !ok {
		c.fail(errorf(401, "auth_invalid", invalid))
		return false
	}
	c.keyID = id
	return true
}

var errBodyRead = errors.New("cannot read request body")

// readBody reads the whole request body, refusing more than limit bytes with
// 413 before reading past the limit.
func (c *call) readBody(limit int) bool {
	req := &c.ctx.Request
	if cl := req.Header.ContentLength(); cl > limit {
		c.fail(bodyTooLarge(limit))
		return false
	}
	if !req.IsBodyStream() {
		c.body = append(c.body[:0], req.Body()...)
		if len(c.body) > limit {
			c.fail(bodyTooLarge(limit))
			return false
		}
		return true
	}
	buf := c.body[:0]
	r := c.ctx.RequestBodyStream()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			c.body = buf
			c.fail(bodyTooLarge(limit))
			return false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			c.body = buf
			c.fail(&Error{Status: 400, Message: errBodyRead.Error(), Reason: "body_read", Cause: err})
			return false
		}
	}
	c.body = buf
	return true
}

func bodyTooLarge(limit int) *Error {
	return &Error{Status: 413, Reason: "body_too_large",
		Message: "request body is larger than the limit of " + strconv.Itoa(limit) + " bytes"}
}

// peekBody parses the routing fields of a JSON body.
func (c *call) peekBody() bool {
	if err := parse.Peek(c.body, &c.fields); err != nil {
		e := &Error{Status: 400, Reason: "bad_json", Message: "invalid request body: " + err.Error(), Cause: err}
		if de := (*parse.DuplicateFieldError)(nil); errors.As(err, &de) {
			e.Reason, e.Param = "duplicate_field", de.Field
		}
		c.fail(e)
		return false
	}
	return true
}

// sessionKey returns the session key: the body's session_id, else the
// x-session-id header. Longer than maxSessionKey characters is refused.
func (c *call) sessionKey() ([]byte, bool) {
	key := c.fields.SessionID
	src := "session_id"
	if len(key) == 0 {
		key = c.ctx.Request.Header.Peek("x-session-id")
		src = "x-session-id"
	}
	if len(key) > maxSessionKey && utf8.RuneCount(key) > maxSessionKey {
		c.fail(&Error{Status: 400, Reason: "session_too_long", Param: src,
			Message: src + " must be at most 256 characters"})
		return nil, false
	}
	if len(key) > 0 {
		c.sessionHash, c.hasSession = affinity.Hash(key), true
	}
	return key, true
}

// routeModel resolves the body's model to its route in the call's family.
func (c *call) routeModel(group []byte) *route {
	if len(c.fields.Model) == 0 {
		c.fail(&Error{Status: 400, Reason: "model_missing", Param: "model", Message: "model is required"})
		return nil
	}
	return c.routeNamed(c.fields.Model, group)
}

func (c *call) routeNamed(name, group []byte) *route {
	m, r, ok := c.st.routeFor(name, c.family, group)
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
	c.spliced = parse.AppendWithoutSessionID(c.spliced[:0], c.body, &c.fields)
	return c.spliced
}

// forward sends the request to a deployment of r chosen by key and relays the
// answer. A deployment that cannot be connected to is marked failed and the
// call moves to the next choice; nothing had reached it.
func (c *call) forward(r *route, key []byte, path string, body []byte, stream bool) {
	var tried affinity.Set
	for {
		i, dep := r.pick(key, tried)
		if dep == nil {
			c.fail(&Error{Status: 502, Reason: "upstream_unreachable", Message: "no upstream deployment could be reached"})
			return
		}
		err := c.send(dep, path, body, stream)
		if err == nil {
			c.relay()
			return
		}
		if !isDialError(err) {
			c.fail(upstreamError(err))
			return
		}
		tried = tried.With(i)
	}
}

// forwardTo sends the request to one given deployment (the one that holds a
// Responses object) and relays the answer.
func (c *call) forwardTo(dep *deployment, path string, body []byte, stream bool) {
	if err := c.send(dep, path, body, stream); err != nil {
		c.fail(upstreamError(err))
		return
	}
	c.relay()
}

// send makes the upstream call; on success the deployment's in-flight count
// stays raised until the answer is relayed.
func (c *call) send(dep *deployment, path string, body []byte, stream bool) error {
	c.dep = dep
	req := fasthttp.AcquireRequest()
	c.prepare(req, dep, path, body)
	c.resp.StreamBody = stream
	dep.inflight.Add(1)
	err := dep.client.Do(req, &c.resp)
	// The request is written whole by the time Do returns; a long stream
	// should not keep its headers and body alive.
	fasthttp.ReleaseRequest(req)
	if err != nil {
		dep.inflight.Add(-1)
		dep.failed()
	}
	return err
}

func upstreamError(err error) *Error {
	if errors.Is(err, fasthttp.ErrTimeout) || isTimeout(err) {
		return &Error{Status: 504, Reason: "upstream_timeout", Message: "the upstream provider did not answer in time", Cause: err}
	}
	return &Error{Status: 502, Reason: "upstream_error", Message: "the upstream provider failed to answer", Cause: err}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// prepare builds the upstream request: the client's end-to-end headers, the
// deployment's URL and credentials, and body.
func (c *call) prepare(req *fasthttp.Request, dep *deployment, path string, body []byte) {
	// Only the stripped headers the client sent are deleted: each deletion
	// scans every header. The server canonicalised the client's header names
	// as it read them, so they match the list exactly.
	var strip uint32
	for name := range c.ctx.Request.Header.All() {
		if i := strippedRequestHeader(name); i >= 0 {
			strip |= 1 << i
		}
	}
	c.ctx.Request.Header.CopyTo(&req.Header)
	req.Header.DisableNormalizing()
	for i, h := range strippedRequestHeaders {
		if strip&(1<<i) != 0 {
			req.Header.DelBytes(h)
		}
	}
	// The URL is set by its parts, which spares the client parsing it whole.
	u := req.URI()
	u.SetSchemeBytes(dep.scheme)
	u.SetHostBytes(dep.host)
	c.url = append(append(c.url[:0], dep.basePath...), path...)
	u.SetPathBytes(c.url)
	if q := c.ctx.URI().QueryString(); len(q) > 0 && c.forwardQuery() {
		u.SetQueryStringBytes(q)
	}
	switch dep.family {
	case Alpha:
		req.Header.Set("X-Api-Key", dep.apiKey)
		if len(req.Header.Peek("Anthropic-Version")) == 0 {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
	case Beta:
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, dep.bearer())
	case Gamma:
		req.Header.Set("X-Goog-Api-Key", dep.apiKey)
	}
	req.Header.SetBytesV("X-Request-Id", c.reqID)
	if body != nil {
		req.SetBodyRaw(body)
	}
}

// forwardQuery reports whether the client's query string goes upstream: on
// the Responses reads, exactly as encoded; elsewhere it is the gateway's own
// (such as the ?beta=true the alpha SDK adds) and is dropped.
func (c *call) forwardQuery() bool {
	return c.ep == epResponsesGet || c.ep == epResponsesInputItems
}

// strippedRequestHeaders never reach an upstream: the client's credentials,
// the gateway's own headers, hop-by-hop headers, and encodings the gateway
// would have to undo.
var strippedRequestHeaders = [][]byte{
	[]byte("Authorization"), []byte("X-Api-Key"), []byte("X-Goog-Api-Key"), []byte("X-Gamma-Api-Key"),
	[]byte("X-Session-Id"), []byte("X-Request-Id"), []byte("Request-Id"),
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("Proxy-Authorization"),
	[]byte("Te"), []byte("Trailer"), []byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Expect"),
	[]byte("Accept-Encoding"), []byte("Cookie"), []byte("Alpha-Workspace-Id"),
	[]byte("Content-Length"),
}

// strippedByLen lists, by name length, the indexes in strippedRequestHeaders
// of the names of that length.
var strippedByLen = func() (t [24][]uint8) {
	if len(strippedRequestHeaders) > 32 {
		panic("proxy: prepare marks stripped headers in a uint32")
	}
	for i, h := range strippedRequestHeaders {
		t[len(h)] = append(t[len(h)], uint8(i))
	}
	return t
}()

// strippedRequestHeader returns the index of name in strippedRequestHeaders,
// or -1.
func strippedRequestHeader(name []byte) int {
	if len(name) >= len(strippedByLen) {
		return -1
	}
	for _, i := range strippedByLen[len(name)] {
		if string(strippedRequestHeaders[i]) == string(name) {
			return int(i)
		}
	}
	return -1
}

// strippedResponseHeaders are the upstream's hop-by-hop headers and those the
// gateway sets itself. Upstreams name headers in any case.
var strippedResponseHeaders = [...]string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer", "Te",
	"Server", "Date", "X-Request-Id", "Request-Id", "Content-Length",
}

func strippedResponseHeader(name []byte) bool {
	for _, s := range strippedResponseHeaders {
		if len(s) == len(name) && strings.EqualFold(s, b2s(name)) {
			return true
		}
	}
	return false
}

// relay writes the upstream answer to the client: headers at once, then the
// body, buffered when it was read whole, else streamed with a flush per
// upstream read.
func (c *call) relay() {
	dep := c.dep
	c.status = c.resp.StatusCode()
	if upstreamFailureStatus(c.status) {
		dep.failed()
	} else {
		dep.succeeded()
	}
	out := &c.ctx.Response
	out.SetStatusCode(c.status)
	out.Header.DisableNormalizing() // the provider's header names go out as it sent them
	for name, value := range c.resp.Header.All() {
		if !strippedResponseHeader(name) {
			out.Header.AddBytesKV(name, value)
		}
	}
	c.setRequestIDHeader()
	stream := c.resp.BodyStream()
	if stream == nil {
		body := c.resp.Body()
		dep.inflight.Add(-1)
		if c.onAnswer != nil && !c.onAnswer(c, body) {
			return
		}
		out.SetBody(body)
		c.firstByte = time.Now()
		c.bytesOut = int64(len(body))
		return
	}
	c.stream = stream
	// The request is sent: a stream may last minutes, and should not hold a
	// large prompt it no longer needs. Small bodies stay with the pooled call.
	c.bodyLen = len(c.body)
	if cap(c.body) > maxHeldBody {
		c.body = nil
	}
	if cap(c.spliced) > maxHeldBody {
		c.spliced = nil
	}
	c.sse = bytes.HasPrefix(c.resp.Header.ContentType(), []byte("text/event-stream"))
	if c.sse {
		out.Header.Set("Cache-Control", "no-cache")
		out.Header.Set("X-Accel-Buffering", "no")
	}
	// The headers go out at once, so the client sees the answer begin, unless
	// body bytes are already here: then they leave with the first of them.
	c.peek, c.canPeek = peekUpstream(stream)
	out.ImmediateHeaderFlush = !c.canPeek || c.peek.br.Buffered() == 0
	size := c.resp.Header.ContentLength()
	if size < 0 || c.sse {
		size = -1
	}
	c.fixedSize = size >= 0
	c.done = true // ownership passes to the body stream: Close releases the call
	c.g.streamStarted(c)
	out.SetBodyStream(c, size)
}

func (c *call) setRequestIDHeader() {
	c.ctx.Response.Header.SetBytesV("X-Request-Id", c.reqID)
	if c.family == Alpha {
		c.ctx.Response.Header.SetBytesV("Request-Id", c.reqID)
	}
}

// Read relays the upstream body. An SSE stream that the upstream fails or
// cuts short, even cleanly, is ended with the family's error frame, so the
// client's SDK reports an error instead of a silently short answer.
func (c *call) Read(p []byte) (int, error) {
	if c.streamErr {
		if len(c.pending) == 0 {
			return 0, io.EOF
		}
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	n, err := c.stream.Read(p)
	if n > 0 {
		if c.bytesOut == 0 {
			c.firstByte = time.Now()
		}
		c.bytesOut += int64(n)
		if c.sse {
			c.heads.feed(p[:n])
		}
	}
	if n > 0 && c.onStream != nil {
		c.onStream(c, p[:n])
		if c.streamErr { // the hook ended the stream: relay its frame instead
			return c.Read(p)
		}
	}
	switch {
	case err == nil:
		return n, nil
	case !c.sse:
		if err != io.EOF {
			c.dep.failed()
			c.resp.SetConnectionClose()
		}
		return n, err
	case err == io.EOF && !c.heads.midEvent() && c.heads.ended(c.family, c.ep == epResponsesCreate):
		return n, io.EOF
	}
	msg := "the upstream stream ended before its final event"
	if err != io.EOF {
		c.dep.failed()
		msg = "the upstream stream was interrupted"
		if isTimeout(err) {
			msg = "the upstream stream timed out"
		}
	}
	c.streamErr = true
	c.resp.SetConnectionClose() // the connection's state is unknown: never reuse it
	c.pending = c.pending[:0]
	if c.heads.midEvent() {
		c.pending = append(c.pending, '\n', '\n') // end the cut event so the error stands alone
	}
	c.pending = appendStreamError(c.pending, c.family, c.ep == epResponsesCreate, msg)
	return n, nil
}

// relayBufPool holds the buffers of fixed-size relays (images and other large
// answers).
var relayBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ssePeekSize is the read an idle SSE relay waits in. A stream spends most of
// its life blocked in a read, and whatever buffer that read is given is held
// per open stream: fasthttp's own chunked loop would hold a pooled 4 KiB one.
// So the relay waits with this small array of the call's, and takes a pooled
// buffer only while an event is coming in.
const ssePeekSize = 96

// SupportsBodyWriteTo tells fasthttp to relay the body with WriteTo: a
// fixed-size body would otherwise be copied through bufio.Writer.ReadFrom,
// allocating 32 KiB per answer, and an SSE body through a pooled 4 KiB buffer
// held while the stream idles.
func (c *call) SupportsBodyWriteTo() bool { return c.fixedSize || c.sse }

// WriteTo relays the upstream body to w: SSE through writeEventsTo, any other
// body with one write and one flush per upstream read.
func (c *call) WriteTo(w io.Writer) (int64, error) {
	if c.sse {
		return c.writeEventsTo(w)
	}
	bp := relayBufPool.Get().(*[]byte)
	defer relayBufPool.Put(bp)
	buf := *bp
	flusher, _ := w.(interface{ Flush() error })
	var written int64
	for {
		n, err := c.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			written += int64(m)
			if werr == nil && flusher != nil {
				werr = flusher.Flush()
			}
			if werr != nil {
				return written, werr
			}
		}
		if err == io.EOF {
			return written, nil
		}
		if err != nil {
			return written, err
		}
	}
}

// writeEventsTo relays an SSE body. Each round waits for data in a small
// read, then goes on into a pooled buffer while the event is unfinished or
// the next upstream chunk is already buffered (see upstreamPeek), and writes
// what it gathered as one chunk. So a burst of events leaves in one write,
// an idle stream holds no buffer, and no finished event waits for the
// network: only the bytes of an unfinished event wait for its rest. Where
// the connection's writer can be reached (chunkWriter), output is flushed
// only before a read that may wait, so the last events leave together with
// the end of the body.
func (c *call) writeEventsTo(w io.Writer) (int64, error) {
	bw := chunkWriter(w)
	var written int64
	for {
		if bw != nil && !c.upstreamReady() && !(c.canPeek && c.peek.ended()) {
			if err := bw.Flush(); err != nil {
				return written, err
			}
		}
		n, err := c.relayEvents(w, bw)
		written += n
		if err == io.EOF {
			return written, nil
		}
		if err != nil {
			return written, err
		}
	}
}

// relayEvents relays one round of writeEventsTo: the wait in the small read,
// then what can be gathered after it, written as one chunk.
func (c *call) relayEvents(w io.Writer, bw *bufio.Writer) (int64, error) {
	n, err := c.Read(c.ssePeek[:])
	if n == 0 {
		return 0, err
	}
	bp := relayBufPool.Get().(*[]byte)
	defer relayBufPool.Put(bp)
	buf := append((*bp)[:0], c.ssePeek[:n]...)
	var written int64
	for err == nil && len(buf) < cap(buf) {
		if !c.upstreamReady() {
			if !c.heads.midEvent() {
				break
			}
			// The rest of this event may take a while: what is finished goes first.
			if end := lastEventEnd(buf); end > 0 {
				m, werr := writeEvents(w, bw, buf[:end])
				written += int64(m)
				if werr != nil {
					return written, werr
				}
				buf = buf[:copy(buf, buf[end:])]
			}
			if bw != nil {
				if werr := bw.Flush(); werr != nil {
					return written, werr
				}
			}
		}
		var m int
		m, err = c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if m == 0 {
			break
		}
	}
	m, werr := writeEvents(w, bw, buf)
	written += int64(m)
	if werr != nil {
		return written, werr
	}
	return written, err
}

// upstreamReady reports whether the next read of the upstream body returns
// data without waiting (see upstreamPeek); false when that cannot be seen.
func (c *call) upstreamReady() bool { return c.canPeek && c.peek.ready() }

// writeEvents writes p as one chunk: into bw unflushed when there is one,
// else through w, which flushes.
func writeEvents(w io.Writer, bw *bufio.Writer, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if bw != nil {
		return len(p), writeChunk(bw, p)
	}
	return w.Write(p)
}

// lastEventEnd returns the length of the finished events at the start of
// b: up to its last blank line, or 0.
func lastEventEnd(b []byte) int {
	end := 0
	if i := bytes.LastIndex(b, lfLF); i >= 0 {
		end = i + 2
	}
	if i := bytes.LastIndex(b, lfCRLF); i >= 0 && i+3 > end {
		end = i + 3
	}
	return end
}

var (
	lfLF   = []byte("\n\n")
	lfCRLF = []byte("\n\r\n")
)

// Close ends the relay: the upstream body is closed (its connection reused
// when fully read, else closed, which cancels the upstream call) and the call
// is released.
func (c *call) Close() error {
	c.resp.CloseBodyStream()
	c.dep.inflight.Add(-1)
	c.g.finish(c)
	c.release()
	return nil
}

// end finishes a call that answered within its handler.
func (c *call) end() {
	if c.done {
		return
	}
	c.g.finish(c)
	c.release()
}
