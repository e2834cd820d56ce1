package wire

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// transport is each deployment's fasthttp.RoundTripper. fasthttp keeps the
// connection pool (dialing, keep-alive reuse, idle timeout, the bound on
// connections and the wait for one); the gateway writes the request, reads
// the answer's header (itself when it is plainly framed, see
// ReadPlainHead, else with fasthttp's public parser), and reads a streamed
// body itself from the connection's bufio.Reader (answerBody). So the relay
// sees how much of the answer is already read (Buffered) without reaching
// into fasthttp's private state, and a streamed call allocates nothing:
// fasthttp's own streamed path wraps each body in a new stream and closures.
//
// C is fasthttp's connection handle, whose type is not exported: it is
// inferred from HostClient's methods (see answerTransport).
type transport[C conn] struct {
	acquire        func(*fasthttp.HostClient, time.Duration, bool) (C, error)
	release, close func(*fasthttp.HostClient, C)
	bodies         sync.Pool // *answerBody[C]
}

// conn is what the gateway uses of fasthttp's connection handle.
type conn interface{ Conn() net.Conn }

func newTransport[C conn](acquire func(*fasthttp.HostClient, time.Duration, bool) (C, error),
	release, close func(*fasthttp.HostClient, C)) *transport[C] {
	return &transport[C]{acquire: acquire, release: release, close: close}
}

// answerTransport is the transport of every deployment.
var answerTransport = newTransport((*fasthttp.HostClient).AcquireConn,
	(*fasthttp.HostClient).ReleaseConn, (*fasthttp.HostClient).CloseConn)

// maxInterim bounds the 1xx answers skipped before the real one.
const maxInterim = 8

// RoundTrip sends req, which must be a Request's (see Request.Do), over
// a pooled connection and reads the answer's header into resp; the body is
// read whole (bounded by the client's MaxResponseBodySize) unless
// resp.StreamBody asks for a stream. It never asks fasthttp to retry: the
// gateway's failover decides whether a call goes again (see Stale and
// package upstream's Relay.Redial).
func (t *transport[C]) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	r := rawRequest(req)
	if r == nil {
		return false, errNotRaw
	}
	cc, sent, err := t.acquireConn(hc, r.fresh)
	if err != nil {
		return false, err
	}
	c := cc.Conn()
	if !r.Cancel.attach(c) {
		t.release(hc, cc) // unused
		return false, ErrCanceled
	}
	resp.ParseNetConn(c)
	// One reading as the write begins, for the idle check (acquireConn's),
	// the write's deadline, the answer's (see flushAwait) and the time to
	// first byte: the write may wait for the answer.
	if sent.IsZero() {
		sent = now()
	}
	dc, _ := c.(*deadlineConn)
	if dc != nil {
		dc.beginSend(sent)
	}
	if err = writeRequest(hc, c, r); err != nil {
		r.Cancel.detach()
		t.close(hc, cc)
		return false, err
	}
	br := hc.AcquireReader(c)
	noBody, err := ReadHead(br, r.headOnly(), resp, r.head)
	if dc != nil {
		dc.headDone(sent, resp.StatusCode(), err == nil && !resp.StreamBody, err) // read whole here, within idle
	}
	closeConn := resp.ConnectionClose()
	switch {
	case err != nil:
	case noBody:
	case resp.StreamBody:
		t.stream(hc, cc, br, resp, closeConn, r.Cancel)
		return false, nil
	default:
		err = readBody(hc, br, resp)
	}
	hc.ReleaseReader(br)
	if r.Cancel.detach() {
		// The read failed on the canceled deadline, or the answer came
		// whole just before it: the connection's deadline is past.
		closeConn = true
		if err != nil {
			err = ErrCanceled // whatever the parser made of it
		}
	}
	if err != nil || closeConn {
		t.close(hc, cc)
	} else {
		t.release(hc, cc)
	}
	return false, err
}

// headDone tells c that the answer's head of the request sent at sent was
// read, with status, or that its read failed with err; whole as headRead's.
// One reading of the clock serves the time to first byte its Observer is
// told of and the connection's last read (see closedWhileIdle, flushAwait).
func (c *deadlineConn) headDone(sent time.Time, status int, whole bool, err error) {
	read := now()
	if c.obs != nil {
		c.obs.HeadRead(mono(sent), mono(read), status, err)
	}
	c.headRead(whole, read)
}

var errNotRaw = errors.New("upstream: a request not made by wire.Request")

// acquireConn returns a connection of hc's pool, or, when fresh is set, one
// dialled for the call: a call sent again after a pooled connection turned
// out stale (see Stale). fasthttp dials only when its pool has no idle
// connection, so the idle ones acquired meanwhile are closed. They are no
// younger than the stale one (the pool hands out the connection released
// last first) and likely closed by the upstream as well.
//
// Without fresh, a pooled connection idle for longer than probeAfter that
// the upstream closed meanwhile (see deadlineConn.closedWhileIdle) is closed
// and another taken, before any byte of the request is written: the call is
// not sent again, whatever its endpoint, and is not a stale one.
//
// Each close frees a connection of the pool's bound, so a dial comes within
// the pool's size, unless other calls keep releasing connections: then,
// after as many, the call fails as busy.
//
// The time it returns is the clock's reading for the look at a pooled
// connection it returns, for the call's write to use as well; zero for a
// connection dialled for the call.
func (t *transport[C]) acquireConn(hc *fasthttp.HostClient, fresh bool) (C, time.Time, error) {
	for range max(hc.MaxConns, 1) + 1 {
		cc, err := t.acquire(hc, 0, false)
		if err != nil {
			return cc, time.Time{}, err
		}
		dc, ok := cc.Conn().(*deadlineConn)
		if !ok || dc.answers == 0 { // dialled for this call
			return cc, time.Time{}, nil
		}
		at := now()
		switch {
		case fresh: // not on a pooled one, closed below
		case !dc.closedWhileIdle(at):
			return cc, at, nil
		case dc.obs != nil:
			dc.obs.IdleClosed()
		}
		t.close(hc, cc)
	}
	var none C
	return none, time.Time{}, fasthttp.ErrNoFreeConns
}

// writeRequest writes r whole; a timeout is fasthttp.ErrTimeout.
func writeRequest(hc *fasthttp.HostClient, c net.Conn, r *Request) error {
	bw := hc.AcquireWriter(c)
	_, err := bw.Write(r.Head)
	if err == nil {
		_, err = bw.Write(r.Body)
	}
	dc, ok := c.(*deadlineConn)
	switch {
	case err != nil:
		hc.ReleaseWriter(bw)
	case ok:
		err = dc.flushAwait(bw, hc) // which gives bw back before it waits
	default:
		err = flushRelease(bw, hc)
	}
	if err != nil && isTimeout(err) {
		err = fasthttp.ErrTimeout
	}
	return err
}

// ReadHead reads the answer's header, past any 1xx ones, and tells whether
// the answer has no body (HEAD, 204, 304, or a length of 0). A plainly
// framed head is read into head when head is not nil (see ReadPlainHead);
// any other, by fasthttp's parser into resp's header.
func ReadHead(br *bufio.Reader, headOnly bool, resp *fasthttp.Response, head *Head) (bool, error) {
	for range maxInterim + 1 {
		resp.Header.Reset()                       // of an interim answer read before
		resp.Header.DisableNormalizing()          // the provider's names go out as it sent them
		resp.Header.SetNoDefaultContentType(true) // and no Content-Type it did not send
		if head != nil {
			switch read, err := ReadPlainHead(br, resp, head); {
			case err != nil:
				return false, err
			case read:
				return headOnly || resp.SkipBody || resp.Header.ContentLength() == 0, nil
			}
		}
		if err := resp.Header.Read(br); err != nil {
			return false, err
		}
		switch s := resp.Header.StatusCode(); {
		case s >= 100 && s < 200 && s != fasthttp.StatusSwitchingProtocols:
			continue
		case s < 200 || s == 204 || s == 304:
			return true, nil
		}
		return headOnly || resp.SkipBody || resp.Header.ContentLength() == 0, nil
	}
	return false, errTooManyInterim
}

var errTooManyInterim = errors.New("upstream: too many 1xx answers")

// readBody reads the body whole, with its trailers when chunked.
func readBody(hc *fasthttp.HostClient, br *bufio.Reader, resp *fasthttp.Response) error {
	if err := resp.ReadBody(br, hc.MaxResponseBodySize); err != nil {
		return err
	}
	if resp.Header.ContentLength() != -1 {
		return nil
	}
	if err := resp.Header.ReadTrailer(br); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// PinIdle has the rest of the body come whole within idle (see
// deadlineConn.pinIdle): the relay asks it of a body it reads whole.
func (b *answerBody[C]) PinIdle() {
	if dc, ok := b.cc.Conn().(*deadlineConn); ok {
		dc.pinIdle()
	}
}

// stream makes resp's body a pooled answerBody over br, which keeps the
// connection, attached to cancel, until the body is closed.
func (t *transport[C]) stream(hc *fasthttp.HostClient, cc C, br *bufio.Reader, resp *fasthttp.Response, closeConn bool, cancel *Cancel) {
	b, _ := t.bodies.Get().(*answerBody[C])
	if b == nil {
		b = &answerBody[C]{t: t}
	}
	size := resp.Header.ContentLength()
	b.hc, b.cc, b.br, b.resp, b.closeConn, b.cancel = hc, cc, br, resp, closeConn, cancel
	b.length, b.left, b.done = size, int64(max(size, 0)), false
	if IsEventStream(&resp.Header) {
		b.shrink(cc.Conn())
	}
	resp.SetBodyStream(b, size)
}

// IsEventStream reports whether an answer with header h is an SSE stream.
// A media type is named in any case (RFC 9110 section 8.3.1).
func IsEventStream(h *fasthttp.ResponseHeader) bool {
	const sse = "text/event-stream"
	ct := h.ContentType()
	return len(ct) >= len(sse) && strings.EqualFold(b2s(ct[:len(sse)]), sse)
}
