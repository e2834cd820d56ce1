package upstream

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/rawio"
)

// Read relays the upstream body. An SSE stream that the upstream fails or
// cuts short, even cleanly, is ended with the family's error frame, so the
// client's SDK reports an error instead of a silently short answer.
func (r *Relay) Read(p []byte) (int, error) {
	if r.broken {
		if len(r.pending) == 0 {
			return 0, io.EOF
		}
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	n, err := r.readBody(p)
	if n > 0 {
		if r.sent == 0 {
			r.firstByte = time.Now()
		}
		r.sent += int64(n)
		r.usage.feed(p[:n])
		if r.sse {
			r.heads.feed(p[:n])
			if r.ident != nil {
				r.ident.Feed(p[:n])
			}
			r.usage.feedText(p[:n])
		}
		if r.tap != nil {
			r.tap.Chunk(p[:n])
			if r.broken { // the tap ended the stream: relay its frame instead
				return r.Read(p)
			}
		}
	}
	switch {
	case err == nil:
		return n, nil
	case err == ErrCanceled:
		// The client left (see Cancel): nobody reads an error frame, and
		// the deployment did not fail.
		r.resp.SetConnectionClose()
		return n, err
	case !r.sse:
		if err != io.EOF {
			r.dep.Failed(err)
			r.resp.SetConnectionClose()
		}
		r.usage.ended = err == io.EOF
		return n, err
	case err == io.EOF && !r.heads.midEvent() && r.heads.ended(r.fam, r.responses):
		r.usage.ended = true
		return n, io.EOF
	}
	r.breakOff(err)
	return n, nil
}

// breakOff ends an SSE stream that failed with err, or ended (err is io.EOF)
// before its final event, with the family's error frame.
func (r *Relay) breakOff(err error) {
	msg := "the upstream stream ended before its final event"
	if err != io.EOF {
		r.dep.Failed(err)
		msg = "the upstream stream was interrupted"
		if IsTimeout(err) {
			msg = "the upstream stream timed out"
		}
	}
	r.broken = true
	r.resp.SetConnectionClose() // the connection's state is unknown: never reuse it
	r.pending = r.pending[:0]
	if r.heads.midEvent() {
		r.pending = append(r.pending, '\n', '\n') // end the cut event so the error stands alone
	}
	r.pending = family.AppendStreamError(r.pending, r.fam, r.responses, msg)
}

// Abort stops relaying the upstream stream and ends it with the family's
// error frame saying msg.
func (r *Relay) Abort(msg string) {
	r.broken = true
	if r.ahead == nil { // else Close cuts the connection, unless the body was read to its end
		r.resp.SetConnectionClose()
	}
	r.pending = append(r.pending[:0], '\n', '\n')
	r.pending = family.AppendStreamError(r.pending, r.fam, r.responses, msg)
}

// IsTimeout reports whether err is a timeout.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// relayBufPool holds the buffers of fixed-size relays (images and other large
// answers).
var relayBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ssePeekSize is the read an idle SSE relay waits in when the upstream body
// cannot wait by itself (see awaiter). A stream spends most of its life
// blocked in a read, and whatever buffer that read is given is held per open
// stream: fasthttp's own chunked loop would hold a pooled 4 KiB one. So the
// relay waits with this small array of the call's, and takes a pooled buffer
// only while an event is coming in.
const ssePeekSize = 96

// SupportsBodyWriteTo tells whether the body should be relayed with WriteTo:
// a fixed-size body would otherwise be copied through bufio.Writer.ReadFrom,
// allocating 32 KiB per answer, and an SSE body through a pooled 4 KiB buffer
// held while the stream idles.
func (r *Relay) SupportsBodyWriteTo() bool { return r.fixedSize || r.sse }

// WriteTo relays the upstream body to w: SSE through writeEventsTo, any other
// body with one write and one flush per upstream read.
func (r *Relay) WriteTo(w io.Writer) (int64, error) {
	if r.sse {
		return r.writeEventsTo(w)
	}
	bp := relayBufPool.Get().(*[]byte)
	defer relayBufPool.Put(bp)
	buf := *bp
	flusher, _ := w.(interface{ Flush() error })
	var written int64
	for {
		n, err := r.Read(buf)
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

// writeEventsTo relays an SSE body. Each round waits for data without a
// buffer (the upstream body's own wait, else a small read), then goes on
// into a pooled buffer while the event is unfinished or the next upstream
// chunk is already buffered (see peeker), and writes
// what it gathered as one chunk, which fasthttp's chunk writer sends at once.
// So a burst of events leaves in one write, an idle stream holds no buffer,
// and no finished event waits for the network: only the bytes of an
// unfinished event wait for its rest.
func (r *Relay) writeEventsTo(w io.Writer) (int64, error) {
	var written int64
	for {
		n, err := r.relayEvents(w)
		written += n
		if err == io.EOF {
			r.holdTail() // when the end was read apart from the last events
			return written, nil
		}
		if err != nil {
			return written, err
		}
	}
}

// RelayEvents is writeEventsTo for a writer that can go on without a
// goroutine of its own: where a round would wait for the upstream's next
// bytes with nothing buffered, the upstream body parks its connection
// instead (see the wire's answerBody.Park), and RelayEvents returns parked;
// wk's Wake comes once the bytes come (or the read's deadline passes, or the
// call is canceled), from another goroutine, which calls RelayEvents again
// to go on. The caller must not touch the Relay between the return and the
// Wake. An SSE body that cannot park (under TLS, or read ahead) is relayed as
// by WriteTo, to its end.
func (r *Relay) RelayEvents(w io.Writer, wk rawio.Waker) (written int64, parked bool, err error) {
	if !r.sse {
		written, err = r.WriteTo(w)
		return written, false, err
	}
	for {
		if r.park(wk) {
			return written, true, nil
		}
		n, err := r.relayEvents(w)
		written += n
		if err == io.EOF {
			r.holdTail()
			return written, false, nil
		}
		if err != nil {
			return written, false, err
		}
	}
}

// parker is a streamed body that can wait for its next bytes without a
// goroutine (see the wire's answerBody.Park).
type parker interface {
	Park(w rawio.Waker) bool
}

// park parks the upstream body's connection until its next bytes, when
// nothing of it is buffered and nothing else reads it.
func (r *Relay) park(wk rawio.Waker) bool {
	if r.broken || r.ahead != nil {
		return false
	}
	p, ok := r.stream.(parker)
	return ok && p.Park(wk)
}

// relayEvents relays one round of writeEventsTo: the wait, then what can
// be gathered after it, written as one chunk. The wait is the upstream
// body's own when it has one (see awaiter), else a read into the small
// array.
func (r *Relay) relayEvents(w io.Writer) (int64, error) {
	var bp *[]byte
	var buf []byte
	var err error
	if r.awaitBody() {
		bp = relayBufPool.Get().(*[]byte)
		var n int
		n, err = r.Read((*bp)[:cap(*bp)])
		buf = (*bp)[:n]
	} else {
		var n int
		n, err = r.Read(r.ssePeek[:])
		if n > 0 {
			bp = relayBufPool.Get().(*[]byte)
			buf = append((*bp)[:0], r.ssePeek[:n]...)
		}
	}
	if len(buf) == 0 {
		if bp != nil {
			relayBufPool.Put(bp)
		}
		return 0, err
	}
	defer relayBufPool.Put(bp)
	var written int64
	for err == nil && len(buf) < cap(buf) {
		if !r.upstreamReady() {
			if !r.heads.midEvent() {
				break
			}
			// The rest of this event may take a while: what is finished goes first.
			m, werr := r.writeFinishedEvents(w, &buf)
			written += int64(m)
			if werr != nil {
				return written, werr
			}
		}
		var m int
		m, err = r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if m == 0 {
			break
		}
	}
	if err == io.EOF {
		r.holdTail() // these are the stream's last events
	}
	m, werr := r.writeEvents(w, buf)
	written += int64(m)
	if werr != nil {
		return written, werr
	}
	return written, err
}

// holdTail has the client's connection hold back the end of the stream (see
// SetTail).
func (r *Relay) holdTail() {
	if r.tail != nil {
		r.tail.HoldTail()
		r.tail = nil
	}
}

// writeFinishedEvents writes the finished events at the start of *buf and
// keeps the rest there.
func (r *Relay) writeFinishedEvents(w io.Writer, buf *[]byte) (int, error) {
	end := parse.LastEventEnd(*buf)
	if end == 0 {
		return 0, nil
	}
	m, err := r.writeEvents(w, (*buf)[:end])
	if err != nil {
		return m, err
	}
	*buf = (*buf)[:copy(*buf, (*buf)[end:])]
	return m, nil
}

// awaiter is a streamed body that can wait for its next bytes without a
// buffer of the caller's (see the wire's answerBody.Await).
type awaiter interface {
	Await() bool
}

// awaitBody waits until the next read of the upstream body returns at
// once, and reports whether it could wait so; the relay's own state
// (broken, a read-ahead) is read without waiting.
func (r *Relay) awaitBody() bool {
	if r.broken || r.ahead != nil {
		return false
	}
	a, ok := r.stream.(awaiter)
	return ok && a.Await()
}

// peeker is a streamed body that can tell what its next read would wait for
// (see the wire's answerBody).
type peeker interface {
	Ready() bool
}

// upstreamReady reports whether the next read of the upstream body returns
// data without waiting; false when that cannot be seen. During a read-ahead,
// only what it holds is ready.
func (r *Relay) upstreamReady() bool {
	if a := r.ahead; a != nil {
		return a.ready()
	}
	p, ok := r.stream.(peeker)
	return ok && p.Ready()
}

// writeEvents writes p as one chunk, less what StripUsage takes out of it
// (in place).
func (r *Relay) writeEvents(w io.Writer, p []byte) (int, error) {
	p = r.usage.strip.filter(p)
	if len(p) == 0 {
		return 0, nil
	}
	return w.Write(p)
}
