package upstream

import (
	"errors"
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// Relay carries one upstream call of a client request and copies its answer
// to the client: the status and end-to-end headers, then the body, buffered
// when it was read whole, else streamed (SSE event by event, see WriteTo).
// It lives inside the caller's pooled request state: the zero value is
// ready, and Reset makes it so again. Not safe for concurrent use.
type Relay struct {
	// resp is the upstream answer; the upstream request is pooled apart (see
	// Send), so an open stream does not hold it. head holds its header
	// lines when the transport read them itself (see eachAnswerHeader).
	resp fasthttp.Response
	head wire.Head
	dep  *Deployment
	// wantStream: the caller asked for a streamed answer; loaded: Load read
	// the answer whole (or it had no body) and the upstream side is done.
	wantStream, loaded bool

	// what is known once a streamed answer begins
	stream    io.Reader
	fam       family.Family
	responses bool // a Responses stream: its final events are its own
	sse       bool
	fixedSize bool
	tap       Tap
	tail      Tail
	heads     eventHeads
	ssePeek   [ssePeekSize]byte // an SSE relay's idle read; see WriteTo
	pending   []byte            // an error frame still to be written
	broken    bool              // the stream ended in error: pending is all that is left
	sent      int64             // body bytes relayed
	firstByte time.Time

	usage usageReader // see usage.go
	// ident reads a traced stream's id and model, nil unless ReadIdentity
	// asked (see identity.go).
	ident       *parse.IdentityScanner
	identWanted bool
	// aheadEnded: a read-ahead read the body to its end, which ended the
	// in-flight count (see endAhead).
	aheadEnded bool

	// ahead takes a finished answer off its connection while the client
	// does not read, nil unless one runs or holds bytes; client is the
	// client's connection that says so, and onStall the function it calls
	// (see ahead.go).
	ahead   *readAhead
	client  Stalls
	onStall func()

	// linesSet says which of the headers Stream sets BeginLines put in the
	// lines already, with Stream's values (see setStreamHeaders).
	linesSet streamHeaders

	// StaleRetries counts the calls sent again after a pooled connection
	// turned out closed (see Redial); redial says the next Send is one.
	StaleRetries int
	redial       bool
}

// Tap sees every chunk of a streamed answer as it is read, before the client
// does; it may Abort the relay.
type Tap interface {
	Chunk(p []byte)
}

// Tail is the client's connection as an SSE relay ends: see Relay.SetTail.
type Tail interface {
	// HoldTail asks the connection to hold back what is written to it from
	// now on, until the server next reads from it, sets its deadlines or
	// closes it, and then to send it all in one write.
	HoldTail()
}

// SetTail has an SSE relay call t.HoldTail once its upstream stream has
// ended, before it writes the stream's last events. fasthttp then writes the
// chunked body's end after them, flushing each piece: held back, the last
// events and the body's end leave the gateway in one write, where they would
// take three, each waking the client.
//
// When t can say that a write to it finds no room (Stalls), the relay takes
// a finished answer that fits the deployment's bound off its upstream
// connection while the client does not read (see readAhead).
func (r *Relay) SetTail(t Tail) {
	r.tail = t
	if s, ok := t.(Stalls); ok {
		r.watchStalls(s)
	}
}

// Reset makes r ready for another call.
func (r *Relay) Reset() {
	r.endAhead()
	r.resp.Reset()
	r.head.Reset()
	r.dep, r.stream, r.tap, r.tail = nil, nil, nil, nil
	r.wantStream, r.loaded = false, false
	r.sse, r.fixedSize, r.broken, r.responses = false, false, false, false
	r.heads = eventHeads{}
	r.pending = r.pending[:0]
	r.sent, r.firstByte = 0, time.Time{}
	r.StaleRetries, r.redial = 0, false
	r.usage.reset()
	r.endIdentity()
	r.linesSet = streamHeaders{}
}

// Send makes the upstream call req to dep; stream asks for the answer's body
// as a stream, else Load reads it (bounded). On success the deployment's
// in-flight count stays raised until the answer is relayed; on failure the
// deployment's health counts it, unless the deployment was only busy (no
// free connection in time) or its answer was over the bound. req is written
// whole by the time Send returns, and may be released then.
//
// Send makes one call: whether a failed one goes again is the caller's to
// decide (see Classify); after Redial, the call goes on a connection dialled
// for it.
//
// sec is the Unix second the call is sent in, as the caller read the clock
// (the call's start, for its first attempt): the deployment's retry budget
// counts the call in it.
func (r *Relay) Send(dep *Deployment, req *Request, stream bool, sec int64) error {
	r.dep = dep
	r.wantStream = stream
	dep.inflight.Add(1)
	dep.Stats.attempts.Add(1)
	dep.Budget.called(sec)
	r.resp.Reset() // no earlier call's connection is read by Stale
	r.resp.StreamBody = stream || dep.loadsItself()
	// wire.ReadPlainHead forgets an earlier call's head in r.head.
	err := req.Do(dep.client, &r.resp, &r.head, r.redial)
	r.redial = false
	if err == nil && !stream {
		// Not asked for as a stream, yet read by Load from one: it comes whole
		// within idle, as fasthttp's whole read does (see the wire's PinIdle).
		if b, ok := r.resp.BodyStream().(interface{ PinIdle() }); ok {
			b.PinIdle()
		}
	}
	if err != nil {
		dep.inflight.Add(-1)
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			return ErrAnswerTooLarge // the deployment answered: it is not failing
		case errors.Is(err, fasthttp.ErrNoFreeConns):
			return err // busy, not failing
		case errors.Is(err, ErrCanceled):
			return err // the caller left, the deployment did not fail
		case Stale(&r.resp):
			return err // a connection the upstream closed while idle, not failing
		}
		dep.Failed(err)
	}
	return err
}

// Redial has the next Send go on a connection dialled for it, not on a
// pooled one: the call failed on a pooled connection that the upstream had
// closed (RetryStale), and the pool's other idle connections are as old. It
// counts in StaleRetries.
func (r *Relay) Redial() {
	r.redial = true
	r.StaleRetries++
}

// Begin records the answer in the deployment's health and copies its status
// and headers to out, but for the upstream's hop-by-hop headers and those the
// gateway sets itself. It returns the status.
//
// The headers are added one by one, in the upstream's order. fasthttp's
// CopyTo would copy them in a third of the time, but what is stripped would
// then have to be deleted from the copy, and fasthttp deletes a header by
// moving the last one into its place: the order of the rest, that of
// repeated headers among them, would not be the upstream's.
func (r *Relay) Begin(out *fasthttp.Response) int {
	status := r.beginStatus(out)
	hopByHop := false
	r.eachAnswerHeader(func(name, value []byte) bool {
		hopByHop = addAnswerHeader(out, name, value) || hopByHop
		return true
	})
	if hopByHop {
		r.dropConnectionOptions(out)
	}
	r.head.Reset() // the client's response has the headers now
	return status
}

// beginStatus records the answer's status in the deployment's health, gives
// it to out, and returns it; the provider's header names go out as it sent
// them.
func (r *Relay) beginStatus(out *fasthttp.Response) int {
	status := r.resp.StatusCode()
	r.judge(status)
	out.SetStatusCode(status)
	out.Header.DisableNormalizing()
	return status
}

// BeginLines is Begin for an answer whose head the client's connection
// completes (see proxy's clientConn.splice): the headers that fasthttp writes
// as they are given it are appended to lines instead, each as fasthttp writes
// one ("name: value" and CRLF), and mark's header is added to out in their
// place, for the connection to put lines there in the bytes fasthttp writes.
// What fasthttp writes apart (Content-Type, Content-Encoding, Set-Cookie) is
// added to out as Begin adds it. The head the client gets is Begin's, byte
// for byte, without fasthttp's copy and checks of each header (about 0.2 µs
// a header under load). ok is false, and Begin's work done instead, when the
// upstream's Connection header names other headers (Begin drops those) or no
// header went to lines.
//
// out no longer sees the headers in lines: one set on it later under the same
// name (Header.Set) is added, not put in their place. The gateway sets only
// headers that are stripped from an answer (its request ids), and on an SSE
// stream the two that Stream sets; for those, the lines take Stream's value
// where Set would have replaced the upstream's (see setStreamHeaders).
func (r *Relay) BeginLines(out *fasthttp.Response, lines, markName, markValue []byte) (status int, _ []byte, ok bool) {
	if r.namesHopByHop() {
		return r.Begin(out), lines, false
	}
	var set *streamHeaders // an SSE stream's: see setStreamHeaders
	if wire.IsEventStream(&r.resp.Header) {
		set = &r.linesSet
	}
	status = r.beginStatus(out)
	start := len(lines)
	if r.head.Read() {
		lines = appendHeadLines(lines, &r.head, out, set)
	} else {
		for name, value := range r.resp.Header.All() {
			lines = appendLine(lines, name, value, out, set)
		}
	}
	r.head.Reset()
	if len(lines) == start {
		return status, lines, false
	}
	out.Header.AddBytesKV(markName, markValue)
	return status, lines, true
}

// appendLine appends the header to lines as fasthttp writes one, unless it
// is stripped or written apart: that one is added to out. On an SSE stream
// (set not nil), the first header of each name Stream sets takes Stream's
// value, as Set would give it, and set notes it.
func appendLine(lines, name, value []byte, out *fasthttp.Response, set *streamHeaders) []byte {
	switch answerHeaderKind(name) {
	case strippedHeader:
	case apartHeader:
		out.Header.AddBytesKV(name, value)
	default:
		lines = append(lines, name...)
		lines = append(lines, ": "...)
		if set != nil && set.take(name) {
			lines = append(lines, streamValue(b2s(name))...)
		} else {
			lines = append(lines, value...)
		}
		lines = append(lines, "\r\n"...)
	}
	return lines
}

// appendHeadLines is appendLine over h's headers. A line the upstream
// wrote as fasthttp writes one (a single space after the colon) is taken as
// it is, with the lines next to it that are too: a provider's head goes in
// a few copies, not four appends a header.
func appendHeadLines(lines []byte, h *wire.Head, out *fasthttp.Response, set *streamHeaders) []byte {
	run := -1 // the first header of the lines taken as they are, when they are
	for i := range h.Len() {
		name, value := h.Header(i)
		if h.Plain(i) && answerHeaderKind(name) == copiedHeader && (set == nil || !set.named(name)) {
			if run < 0 {
				run = i
			}
			continue
		}
		if run >= 0 {
			lines = append(lines, h.Lines(run, i)...)
			run = -1
		}
		lines = appendLine(lines, name, value, out, set)
	}
	if run >= 0 {
		lines = append(lines, h.Lines(run, h.Len())...)
	}
	return lines
}

// The headers Stream sets on an SSE stream's response, with their values.
// fasthttp's Set replaces the first header named as it is named, byte for
// byte, and adds one otherwise.
const (
	streamCacheControl = "Cache-Control"
	streamAccel        = "X-Accel-Buffering"
)

// streamHeaders says which of the headers Stream sets are in the lines.
type streamHeaders struct{ cacheControl, accel bool }

// named reports whether name is one that Stream sets and that the lines do
// not have yet.
func (s *streamHeaders) named(name []byte) bool {
	switch string(name) {
	case streamCacheControl:
		return !s.cacheControl
	case streamAccel:
		return !s.accel
	}
	return false
}

// take notes name when it is one that Stream sets and that the lines do not
// have yet, and reports whether it was.
func (s *streamHeaders) take(name []byte) bool {
	if !s.named(name) {
		return false
	}
	if string(name) == streamCacheControl {
		s.cacheControl = true
	} else {
		s.accel = true
	}
	return true
}

// streamValue is the value Stream sets for name.
func streamValue(name string) string {
	if name == streamCacheControl {
		return "no-cache"
	}
	return "no"
}

// setStreamHeaders sets an SSE stream's Cache-Control and X-Accel-Buffering
// on out, but those BeginLines put in the lines already.
func (r *Relay) setStreamHeaders(out *fasthttp.Response) {
	if !wire.IsEventStream(&r.resp.Header) {
		return
	}
	if !r.linesSet.cacheControl {
		out.Header.Set(streamCacheControl, streamValue(streamCacheControl))
	}
	if !r.linesSet.accel {
		out.Header.Set(streamAccel, streamValue(streamAccel))
	}
}

// addAnswerHeader adds an answer's header to out unless it is stripped, and
// reports whether it is a Connection header naming other headers.
func addAnswerHeader(out *fasthttp.Response, name, value []byte) bool {
	if !strippedResponseHeader(name) {
		out.Header.AddBytesKV(name, value)
		return false
	}
	return isConnection(name) && ConnectionOptions(value)
}

// namesHopByHop reports whether one of the answer's Connection headers names
// other headers (see ConnectionOptions). A head the transport read has at most
// one Connection header, and knows where it is.
func (r *Relay) namesHopByHop() bool {
	if r.head.Read() {
		v, ok := r.head.Connection()
		return ok && ConnectionOptions(v)
	}
	hopByHop := false
	r.eachAnswerHeader(func(name, value []byte) bool {
		hopByHop = isConnection(name) && ConnectionOptions(value)
		return !hopByHop
	})
	return hopByHop
}

// eachAnswerHeader calls f with each of the answer's headers, as the
// upstream named them, until f returns false: from the lines the transport
// kept (see wire.ReadPlainHead), else from the header fasthttp's parser filled.
func (r *Relay) eachAnswerHeader(f func(name, value []byte) bool) {
	if r.head.Read() {
		for i := range r.head.Len() {
			if !f(r.head.Header(i)) {
				return
			}
		}
		return
	}
	for name, value := range r.resp.Header.All() {
		if !f(name, value) {
			return
		}
	}
}

// dropConnectionOptions removes from out the headers that the upstream's
// Connection headers name (see ConnectionOptions); Begin added them under the
// names the upstream sent.
func (r *Relay) dropConnectionOptions(out *fasthttp.Response) {
	r.eachAnswerHeader(func(conn, list []byte) bool {
		if isConnection(conn) {
			r.eachAnswerHeader(func(name, _ []byte) bool {
				if NamedIn(list, name) {
					out.Header.DelBytes(name)
				}
				return true
			})
		}
		return true
	})
}

func isConnection(name []byte) bool {
	return len(name) == len("Connection") && strings.EqualFold(b2s(name), "Connection")
}

// Streamed reports whether the answer's body comes as a stream, to be
// relayed by Stream; otherwise Load put it whole in the client's response.
func (r *Relay) Streamed() bool { return !r.loaded }

// Stream prepares the relay of a streamed answer as the body of out, whose
// family fam (a Responses stream when responses is set) decides how a broken
// SSE stream is ended; tap, when not nil, sees every chunk. It returns the
// body size to give fasthttp's SetBodyStream: -1 when unknown or SSE.
func (r *Relay) Stream(out *fasthttp.Response, fam family.Family, responses bool, tap Tap) int {
	r.stream = r.resp.BodyStream()
	r.fam, r.responses, r.tap = fam, responses, tap
	r.sse = wire.IsEventStream(&r.resp.Header)
	r.beginIdentity(fam, responses)
	r.usage.text.Reset(responses)
	r.setStreamHeaders(out)
	// The headers go out at once, so the client sees the answer begin, unless
	// body bytes are already here: then they leave with the first of them.
	out.ImmediateHeaderFlush = !r.upstreamReady()
	size := r.resp.Header.ContentLength()
	if size < 0 || r.sse {
		size = -1
	}
	r.fixedSize = size >= 0
	return size
}

// Streaming reports whether a streamed answer is being relayed.
func (r *Relay) Streaming() bool { return r.stream != nil }

// SSE reports whether the streamed answer is an event stream.
func (r *Relay) SSE() bool { return r.sse }

// Sent returns the body bytes relayed so far.
func (r *Relay) Sent() int64 { return r.sent }

// FirstByte returns when the first body byte was read for the client, or
// the zero time.
func (r *Relay) FirstByte() time.Time { return r.firstByte }

// Close ends a streamed relay: the upstream body is closed (its connection
// reused when fully read, else closed, which cancels the upstream call) and
// the deployment's in-flight count ends, unless a read-ahead ended it when
// it read the body to its end.
func (r *Relay) Close() {
	ended := r.endAhead() // its goroutine is done before the body closes
	r.resp.CloseBodyStream()
	if !ended {
		r.dep.inflight.Add(-1)
	}
}

// strippedResponseHeaders are the upstream's hop-by-hop headers, those the
// gateway sets itself, and Alt-Svc, which names other endpoints of the
// provider's origin (RFC 7838): relayed, it would send a client's browser
// looking for HTTP/3 on the gateway's host. Upstreams name headers in any
// case.
var strippedResponseHeaders = [...]string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer", "Te",
	"Server", "Date", "X-Request-Id", "Request-Id", "Content-Length", "Alt-Svc",
}

// What the relay does with an answer's header: copy it to the client's
// response, strip it (strippedResponseHeaders), or add it to the response's
// header, which fasthttp writes apart (writtenApartHeaders).
type headerKind uint8

const (
	copiedHeader headerKind = iota
	strippedHeader
	apartHeader
)

// writtenApartHeaders are the response headers fasthttp keeps apart from the
// others (ResponseHeader.setSpecialHeader), writing them in places of their
// own, that an answer's stripped headers do not already cover.
var writtenApartHeaders = [...]string{"Content-Type", "Content-Encoding", "Set-Cookie"}

// headerKindsByLen lists strippedResponseHeaders and writtenApartHeaders by
// their length, with their kind: most of a provider's headers are longer
// than any of them, and are copied after one look.
var headerKindsByLen = func() (t [len("Transfer-Encoding") + 1][]namedKind) {
	add := func(names []string, kind headerKind) {
		for _, h := range names {
			t[len(h)] = append(t[len(h)], namedKind{h, kind})
		}
	}
	add(strippedResponseHeaders[:], strippedHeader)
	add(writtenApartHeaders[:], apartHeader)
	return t
}()

type namedKind struct {
	name string
	kind headerKind
}

// answerHeaderKind returns what the relay does with the answer's header name.
func answerHeaderKind(name []byte) headerKind {
	if len(name) >= len(headerKindsByLen) {
		return copiedHeader
	}
	for _, k := range headerKindsByLen[len(name)] {
		if strings.EqualFold(k.name, b2s(name)) {
			return k.kind
		}
	}
	return copiedHeader
}

func strippedResponseHeader(name []byte) bool { return answerHeaderKind(name) == strippedHeader }
