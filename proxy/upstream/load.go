package upstream

import (
	"errors"
	"io"
	"slices"

	"github.com/valyala/fasthttp"
)

// ErrAnswerTooLarge is returned by Load for an answer larger than its bound:
// nothing of it has reached the client.
var ErrAnswerTooLarge = errors.New("upstream: answer larger than the limit")

// streamAbove is the length above which an answer of known length that
// nobody needs to see whole is relayed as a stream rather than buffered.
const streamAbove = 1 << 20

// minLoadBuf is the first buffer of an answer of unknown length.
const minLoadBuf = 16 << 10

// Load puts an answer that was not asked for as a stream into out's body
// without a second copy, and lets the upstream connection go. fasthttp read
// it whole within the deployment's bound, unless the bound is above what it
// reads at linear cost (see loadsItself): then Load reads it, refusing more
// than limit bytes with ErrAnswerTooLarge before any of it is relayed, and
// leaves an answer of known length above streamAbove to Stream unless whole
// is set (the caller must see the body). After Load, Streamed tells which
// way the answer goes.
func (r *Relay) Load(out *fasthttp.Response, limit int, whole bool) error {
	stream := r.resp.BodyStream()
	if stream == nil { // read whole by fasthttp, or an answer without a body
		out.SwapBody(r.resp.SwapBody(out.SwapBody(nil)))
		r.usage.feed(out.Body())
		r.loaded = true
		r.dep.inflight.Add(-1)
		return nil
	}
	if r.wantStream {
		return nil
	}
	size := r.resp.Header.ContentLength()
	if size > limit {
		r.endLoad(ErrAnswerTooLarge)
		return ErrAnswerTooLarge
	}
	if size > streamAbove && !whole {
		return nil
	}
	buf, err := readAnswer(out.SwapBody(nil)[:0], stream, size, limit)
	out.SwapBody(buf)
	r.endLoad(err)
	if err == nil {
		r.usage.feed(buf)
	}
	return err
}

// readAnswer appends the body in stream to buf: its length when known
// (size >= 0) is allocated at once; else the buffer doubles, so the cost is
// linear in the answer's size. More than limit bytes is ErrAnswerTooLarge.
func readAnswer(buf []byte, stream io.Reader, size, limit int) ([]byte, error) {
	if size >= 0 {
		buf = slices.Grow(buf, size)
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), minLoadBuf))
		}
		n, err := stream.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > limit:
			return buf, ErrAnswerTooLarge
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		}
	}
}

// endLoad ends the upstream side of a loaded answer: the connection is
// reused when the body was read whole, else closed; err other than a bound
// counts against the deployment's health.
func (r *Relay) endLoad(err error) {
	if err != nil {
		r.resp.SetConnectionClose()
		if !errors.Is(err, ErrAnswerTooLarge) {
			r.dep.Failed(err)
		}
	}
	r.resp.CloseBodyStream()
	r.loaded = true
	r.dep.inflight.Add(-1)
}
