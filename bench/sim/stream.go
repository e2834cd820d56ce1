package sim

import (
	"bufio"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// frameSource produces the frames of one SSE answer. It must not reference the
// RequestCtx: frames are written after the handler has returned.
type frameSource interface {
	// frame appends frame i (from 0) to dst; ok is false once i is past the last frame.
	frame(dst []byte, i int) (out []byte, ok bool)
	// errorFrame appends the family's in-stream error, sent in place of frame i.
	errorFrame(dst []byte, i int) []byte
}

// streamPlan is how a stream is paced and broken.
type streamPlan struct {
	sleep      func(time.Duration) bool // false: stop, the server is closing
	delay      time.Duration
	first      time.Duration // after the headers, before frame 0
	stamp      bool          // each frame starts with a StampPrefix comment line
	errorAfter int
	cutAfter   int
}

// answerStream answers ctx with the frames of src as text/event-stream, one flush per
// frame. With a cut fault it writes the answer itself on the hijacked connection.
func (s *Server) answerStream(ctx *fasthttp.RequestCtx, src frameSource, c *control) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	plan := streamPlan{sleep: s.sleep, delay: c.eventDelay, first: c.firstEvent, stamp: c.stamp, errorAfter: c.fault.ErrorAfter, cutAfter: c.fault.CutAfter}
	if plan.cutAfter == 0 {
		// The headers go out at once, not with the first frame: a model's
		// answer starts before its first token.
		ctx.Response.ImmediateHeaderFlush = plan.first > 0
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			writeFrames(w, src, plan)
		})
		return
	}
	ctx.Response.Header.SetContentLength(-1)
	head := ctx.Response.Header.AppendBytes(nil)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(conn net.Conn) {
		if _, err := conn.Write(head); err != nil {
			return
		}
		w := bufio.NewWriter(chunkWriter{conn})
		writeFrames(w, src, plan)
		// Returning closes conn before the terminating chunk: the stream is cut.
	})
}

// writeFrames writes the frames of src to w, flushing after each, until the
// stream ends, the plan breaks it, or the client goes away.
func writeFrames(w *bufio.Writer, src frameSource, plan streamPlan) {
	bp := getBuf()
	defer putBuf(bp)
	buf := *bp
	for i := 0; ; i++ {
		if plan.cutAfter > 0 && i == plan.cutAfter {
			break
		}
		if !plan.pause(i) {
			break
		}
		buf = buf[:0]
		if plan.stamp {
			buf = AppendStamp(buf, time.Now())
		}
		var ok bool
		last := plan.errorAfter > 0 && i == plan.errorAfter
		if last {
			buf, ok = src.errorFrame(buf, i), true
		} else {
			buf, ok = src.frame(buf, i)
		}
		if !ok {
			break
		}
		if _, err := w.Write(buf); err != nil || w.Flush() != nil || last {
			break
		}
	}
	*bp = buf
}

// pause waits before frame i: the first-event delay before frame 0, the
// event delay before the others. False: the server is closing.
func (p *streamPlan) pause(i int) bool {
	d := p.delay
	if i == 0 {
		d = p.first
	}
	return d <= 0 || p.sleep(d)
}

// StampPrefix starts the comment line that opens a stamped frame; the send
// time in unix nanoseconds and a newline follow it.
const StampPrefix = ": t="

// AppendStamp appends the stamp line of a frame sent at t to dst.
func AppendStamp(dst []byte, t time.Time) []byte {
	dst = append(dst, StampPrefix...)
	dst = strconv.AppendInt(dst, t.UnixNano(), 10)
	return append(dst, '\n')
}

// chunkWriter frames each Write as one HTTP/1.1 chunk.
type chunkWriter struct {
	conn net.Conn
}

func (cw chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var head [20]byte
	b := strconv.AppendInt(head[:0], int64(len(p)), 16)
	b = append(b, '\r', '\n')
	if _, err := cw.conn.Write(b); err != nil {
		return 0, err
	}
	if _, err := cw.conn.Write(p); err != nil {
		return 0, err
	}
	if _, err := cw.conn.Write([]byte("\r\n")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// hijackReset closes the connection without answering.
func hijackReset(ctx *fasthttp.RequestCtx) {
	conn := ctx.Conn()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(net.Conn) { resetConn(conn) })
}

// hijackPartial sends the headers of the plain answer in ctx (with its full
// Content-Length) and only its first n body bytes, then drops the connection.
func hijackPartial(ctx *fasthttp.RequestCtx, n int) {
	body := ctx.Response.Body()
	ctx.Response.Header.SetContentLength(len(body))
	out := ctx.Response.Header.AppendBytes(nil)
	out = append(out, body[:min(n, len(body))]...)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(conn net.Conn) {
		_, _ = conn.Write(out)
	})
}

// textPiece returns piece i of n nearly equal pieces of text, cut at rune starts.
func textPiece(text string, i, n int) string {
	return text[runeStart(text, i*len(text)/n):runeStart(text, (i+1)*len(text)/n)]
}

func runeStart(text string, at int) int {
	for at < len(text) && text[at]&0xc0 == 0x80 {
		at++
	}
	return at
}
