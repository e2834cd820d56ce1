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
		r.moveBody(out)
		r.usage.feed(out.Body())
		r.loaded, r.usage.ended = true, true
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
		r.usage.ended = true
	}
	return err
}

// copyBelow is the size up to which moveBody copies an answer's body.
const copyBelow = 64 << 10

// moveBody gives out the body that fasthttp read whole into the upstream
// answer. A small body is copied, so that both keep the buffers their bodies
// fit in. Swapped, the upstream answer was left with the buffer the client's
// response took fresh from fasthttp's pool: half the pooled buffers stayed
// small, and a read into one allocated its body anew (about 1.1 KB per chat
// completion under the harness's chat load, a collection every 200 ms). A
// large body's buffer is swapped rather than copied.
func (r *Relay) moveBody(out *fasthttp.Response) {
	if body := r.resp.Body(); len(body) <= copyBelow {
		out.SetBody(body)
		return
	}
	out.SwapBody(r.resp.SwapBody(out.SwapBody(nil)))
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
		if !errors.Is(err, ErrAnswerTooLarge) && !errors.Is(err, ErrCanceled) {
			r.dep.Failed(err)
		}
	}
	r.resp.CloseBodyStream()
	r.loaded = true
	r.dep.inflight.Add(-1)
}
