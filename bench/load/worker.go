package load

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// errKind indexes worker.errs; errKindNames maps it to the Result.Errors keys.
type errKind int

const (
	kindStatus errKind = iota
	kindTimeout
	kindRefused
	kindClosed
	kindBody
	kindTooLarge
	kindCheck
	kindOther
	numErrKinds
)

var errKindNames = [numErrKinds]string{
	ErrKindStatus, ErrKindTimeout, ErrKindRefused, ErrKindClosed,
	ErrKindBody, ErrKindTooLarge, ErrKindCheck, ErrKindOther,
}

// maxStatus bounds the status codes counted one by one; others count as 0.
const maxStatus = 600

// worker sends requests one at a time over the shared client and records
// what it sees in its own histograms and counters, so no lock is taken per
// request; run merges the workers when all are done.
type worker struct {
	client  *fasthttp.HostClient
	spec    *Spec
	timeout time.Duration

	req  fasthttp.Request
	resp fasthttp.Response
	buf  []byte
	sse  SSECounter
	// groups, when the spec groups its calls, counts them by its header.
	groups *groups

	lat, ttfb *Histogram
	ok        uint64
	late      uint64
	bytes     uint64
	events    uint64
	errs      [numErrKinds]uint64
	statuses  [maxStatus]uint64
}

func newWorker(c *fasthttp.HostClient, spec *Spec, timeout time.Duration) *worker {
	w := &worker{
		client:  c,
		spec:    spec,
		timeout: timeout,
		lat:     NewHistogram(),
		ttfb:    NewHistogram(),
	}
	spec.BuildRequest(&w.req)
	if spec.Check.streams() {
		w.buf = make([]byte, 32<<10)
	}
	return w
}

// do sends request seq and records it; latency counts from start, which is
// the intended send time in an open loop.
func (w *worker) do(seq uint64, start time.Time) {
	if w.spec.Mutate != nil {
		w.spec.Mutate(&w.req, seq)
	}
	err := w.client.DoDeadline(&w.req, &w.resp, time.Now().Add(w.timeout))
	if err != nil {
		w.errs[classify(err)]++
		return
	}
	status := w.resp.StatusCode()
	if status > 0 && status < maxStatus {
		w.statuses[status]++
	} else {
		w.statuses[0]++
	}
	n, first, kind := w.readBody()
	end := time.Now()
	switch {
	case kind != numErrKinds:
		w.errs[kind]++
	case status != w.spec.Check.status():
		w.errs[kindStatus]++
	case w.spec.Check.Events > 0 && w.sse.Events() != w.spec.Check.Events:
		w.errs[kindCheck]++
	default:
		w.ok++
		w.bytes += uint64(n)
		w.events += uint64(w.sse.Events())
		w.lat.Record(end.Sub(start))
		w.ttfb.Record(first.Sub(start))
		if w.groups != nil {
			w.groups.record(w.resp.Header.Peek(w.spec.GroupBy), start, first)
		}
	}
}

// readBody reads the body, buffered or streamed, and returns its size, the
// time its first bytes arrived and the error kind, or numErrKinds if none.
func (w *worker) readBody() (int, time.Time, errKind) {
	w.sse.Reset()
	if !w.resp.IsBodyStream() {
		body := w.resp.Body()
		if w.spec.Check.SSE {
			_, _ = w.sse.Write(body)
		}
		return len(body), time.Now(), numErrKinds
	}
	n, first, kind := w.readStream(w.resp.BodyStream())
	if err := w.resp.CloseBodyStream(); err != nil && kind == numErrKinds {
		kind = classifyBody(err)
	}
	return n, first, kind
}

func (w *worker) readStream(r io.Reader) (int, time.Time, errKind) {
	var first time.Time
	total, limit := 0, w.spec.Check.maxBody()
	for {
		n, err := r.Read(w.buf)
		if n > 0 {
			if first.IsZero() {
				first = time.Now()
			}
			total += n
			if w.spec.Check.SSE {
				_, _ = w.sse.Write(w.buf[:n])
			}
			if total > limit {
				return total, first, kindTooLarge
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return total, first, classifyBody(err)
		}
	}
	if first.IsZero() {
		first = time.Now()
	}
	return total, first, numErrKinds
}

// appendErrCounts adds errs to dst, the Result.Errors form, and returns it.
func appendErrCounts(dst map[string]uint64, errs *[numErrKinds]uint64) map[string]uint64 {
	for k, n := range errs {
		if n > 0 {
			if dst == nil {
				dst = make(map[string]uint64)
			}
			dst[errKindNames[k]] += n
		}
	}
	return dst
}

// appendStatusCounts adds statuses to dst, the Result.Statuses form, and returns it.
func appendStatusCounts(dst map[int]uint64, statuses *[maxStatus]uint64) map[int]uint64 {
	for code, n := range statuses {
		if n > 0 {
			if dst == nil {
				dst = make(map[int]uint64)
			}
			dst[code] += n
		}
	}
	return dst
}

// classify maps a client error to its kind.
func classify(err error) errKind {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return kindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return kindRefused
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return kindClosed
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return kindTooLarge
	}
	return kindOther
}

// classifyBody maps an error met while reading a streamed body to its kind.
func classifyBody(err error) errKind {
	if k := classify(err); k != kindOther {
		return k
	}
	return kindBody
}
