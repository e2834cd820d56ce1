package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/load"
)

// DefaultProbeTimeout bounds one probe when the context has no earlier deadline.
const DefaultProbeTimeout = 30 * time.Second

// ErrProbe is wrapped by every error of a probe whose answer was wrong.
var ErrProbe = errors.New("scenario: wrong answer")

// maxErrorBody bounds the part of a wrong answer's body quoted in the error.
const maxErrorBody = 300

// Probe sends the first request of spec once and checks the answer as a load
// run would: its status and, for an SSE check, its number of events (or, when
// Check.Events is zero, that one event arrives; the stream is then closed
// without waiting for its end). A wrong answer gives an error wrapping
// ErrProbe that quotes the start of the body.
func Probe(ctx context.Context, spec *load.Spec) error {
	_, err := probe(ctx, spec, spec.Check.SSE && spec.Check.Events == 0)
	return err
}

// countEvents sends the first request of spec once, reads its SSE answer to
// the end and returns the number of events.
func countEvents(ctx context.Context, spec *load.Spec) (int, error) {
	s := *spec
	s.Check.SSE, s.Check.Events = true, 0
	return probe(ctx, &s, false)
}

// probe is Probe that returns the number of SSE events counted; with
// firstEvent it stops reading at the first event.
func probe(ctx context.Context, spec *load.Spec, firstEvent bool) (int, error) {
	if err := load.CheckLoopback(spec.URL); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(DefaultProbeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req := newRequest(spec, 0)
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	maxBody := spec.Check.MaxBody
	if maxBody <= 0 {
		maxBody = load.DefaultMaxBody
	}
	c := &fasthttp.Client{
		MaxResponseBodySize:       maxBody,
		StreamResponseBody:        true,
		ReadTimeout:               time.Until(deadline),
		WriteTimeout:              time.Until(deadline),
		MaxIdemponentCallAttempts: 1,
		DisablePathNormalizing:    true,
		TLSConfig:                 spec.TLS,
	}
	defer c.CloseIdleConnections()
	if err := c.DoDeadline(req, resp, deadline); err != nil {
		return 0, fmt.Errorf("cannot send %s %s: %w", req.Header.Method(), spec.URL, err)
	}
	defer resp.CloseBodyStream()
	return checkAnswer(spec, resp, maxBody, firstEvent)
}

// checkAnswer reads the body of resp and checks it against spec.Check.
func checkAnswer(spec *load.Spec, resp *fasthttp.Response, maxBody int, firstEvent bool) (int, error) {
	want := spec.Check.Status
	if want == 0 {
		want = fasthttp.StatusOK
	}
	var head bytes.Buffer
	var sse load.SSECounter
	firstOnly := firstEvent && resp.StatusCode() == want
	readErr := readBody(resp, maxBody, func(p []byte) bool {
		if head.Len() < maxErrorBody {
			head.Write(p[:min(len(p), maxErrorBody-head.Len())])
		}
		_, _ = sse.Write(p)
		return !(firstOnly && sse.Events() > 0)
	})
	switch {
	case resp.StatusCode() != want:
		return 0, fmt.Errorf("%w: %s answered %d, want %d: %q", ErrProbe, spec.URL, resp.StatusCode(), want, head.Bytes())
	case readErr != nil:
		return 0, fmt.Errorf("cannot read the answer of %s: %w", spec.URL, readErr)
	case spec.Check.SSE && spec.Check.Events > 0 && sse.Events() != spec.Check.Events:
		return 0, fmt.Errorf("%w: %s sent %d events, want %d", ErrProbe, spec.URL, sse.Events(), spec.Check.Events)
	case spec.Check.SSE && sse.Events() == 0:
		return 0, fmt.Errorf("%w: %s sent no event: %q", ErrProbe, spec.URL, head.Bytes())
	}
	return sse.Events(), nil
}

// readBody feeds the body of resp, streamed or not, to more until it returns
// false or the body ends; a body over maxBody is an error.
func readBody(resp *fasthttp.Response, maxBody int, more func([]byte) bool) error {
	if !resp.IsBodyStream() {
		more(resp.Body())
		return nil
	}
	r := resp.BodyStream()
	buf := make([]byte, 32<<10)
	total := 0
	for {
		n, err := r.Read(buf)
		total += n
		if n > 0 && !more(buf[:n]) {
			return nil
		}
		if total > maxBody {
			return fmt.Errorf("body over %d bytes", maxBody)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
