package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// ErrFileLimit is returned when the open-files limit cannot cover the streams asked for.
var ErrFileLimit = errors.New("load: open-files limit too low")

// fileMargin is the number of descriptors kept free for everything but the streams.
const fileMargin = 64

// IdleOptions shape HoldIdle. The zero value holds 1,000 streams for 5 s.
type IdleOptions struct {
	// Streams is the number of streams to open and hold (default 1,000).
	Streams int
	// Hold is how long all streams stay open once opened (default 5 s).
	Hold time.Duration
	// OpenConcurrency is how many streams are being opened at once (default 64).
	OpenConcurrency int
	// Timeout bounds the opening of each stream: its headers and, for an SSE
	// check, its first event (default 10 s).
	Timeout time.Duration
	// PIDs are the target processes whose memory is sampled; may be empty.
	PIDs []int
	// SampleInterval is the RSS sampling period while holding (default 100 ms).
	SampleInterval time.Duration
}

func (o *IdleOptions) ensureDefaults() {
	if o.Streams <= 0 {
		o.Streams = 1000
	}
	if o.Hold <= 0 {
		o.Hold = 5 * time.Second
	}
	o.Hold = min(o.Hold, MaxDuration)
	if o.OpenConcurrency <= 0 {
		o.OpenConcurrency = 64
	}
	o.OpenConcurrency = min(o.OpenConcurrency, o.Streams)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
}

// IdleResult is what HoldIdle measured. RSS figures are sums over the PIDs.
type IdleResult struct {
	URL       string            `json:"url"`
	Streams   int               `json:"streams"` // asked for
	Opened    int               `json:"opened"`
	Errors    map[string]uint64 `json:"errors,omitempty"`
	OpenTime  time.Duration     `json:"open_time_ns"`
	Hold      time.Duration     `json:"hold_ns"`
	FileLimit uint64            `json:"file_limit"` // this process's soft limit during the run

	RSSBefore uint64 `json:"rss_before"` // bytes, before the first stream opened
	RSSHeld   uint64 `json:"rss_held"`   // bytes, at the end of the hold
	RSSPeak   uint64 `json:"rss_peak"`   // bytes, the most seen while holding
	// BytesPerStream is (RSSHeld - RSSBefore) / Opened.
	BytesPerStream float64 `json:"bytes_per_stream"`
}

// HoldIdle opens opts.Streams streams of spec (typically SSE streams the
// target keeps open), holds them all open for opts.Hold without reading,
// and closes them. With opts.PIDs it reports the target's memory per idle
// stream from its RSS before and after. Held streams cost no goroutine: each
// is a response whose body stream is left unread until the end.
func HoldIdle(ctx context.Context, spec *Spec, opts IdleOptions) (IdleResult, error) {
	opts.ensureDefaults()
	addr, err := hostAddr(spec.URL)
	if err != nil {
		return IdleResult{}, err
	}
	res := IdleResult{URL: spec.URL, Streams: opts.Streams, Hold: opts.Hold}
	if res.FileLimit, err = RaiseFileLimit(uint64(opts.Streams + fileMargin)); err != nil {
		return res, fmt.Errorf("cannot hold %d streams: %w", opts.Streams, err)
	}
	before, err := ReadProcs(opts.PIDs...)
	if err != nil {
		return res, err
	}
	res.RSSBefore = before.RSS

	check := spec.Check
	check.Stream = true
	client, err := newClient(addr, opts.Streams, spec, &check, opts.Timeout)
	if err != nil {
		return res, err
	}
	defer client.CloseIdleConnections()
	h := idleHolder{client: client, spec: spec, check: &check, opts: &opts}
	start := time.Now()
	streams := h.openAll(ctx)
	res.OpenTime = time.Since(start)
	defer closeAll(streams)
	res.Opened, res.Errors = h.opened(), h.errCounts()

	if err := h.hold(ctx, &res); err != nil {
		return res, err
	}
	if res.Opened > 0 && res.RSSHeld > res.RSSBefore {
		res.BytesPerStream = float64(res.RSSHeld-res.RSSBefore) / float64(res.Opened)
	}
	return res, nil
}

// idleHolder opens the streams of one HoldIdle call.
type idleHolder struct {
	client *fasthttp.HostClient
	spec   *Spec
	check  *Check
	opts   *IdleOptions
	next   atomic.Int64
	ok     atomic.Int64
	mu     sync.Mutex // guards errs
	errs   [numErrKinds]uint64
}

// openAll opens the streams with opts.OpenConcurrency openers and returns
// the open ones; failures are counted by kind.
func (h *idleHolder) openAll(ctx context.Context) []*fasthttp.Response {
	streams := make([]*fasthttp.Response, h.opts.Streams)
	var wg sync.WaitGroup
	for range h.opts.OpenConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.opener(ctx, streams)
		}()
	}
	wg.Wait()
	open := streams[:0]
	for _, s := range streams {
		if s != nil {
			open = append(open, s)
		}
	}
	return open
}

func (h *idleHolder) opener(ctx context.Context, streams []*fasthttp.Response) {
	var req fasthttp.Request
	h.spec.BuildRequest(&req)
	buf := make([]byte, 4<<10)
	for ctx.Err() == nil {
		i := h.next.Add(1) - 1
		if i >= int64(len(streams)) {
			return
		}
		if h.spec.Mutate != nil {
			h.spec.Mutate(&req, uint64(i))
		}
		resp := fasthttp.AcquireResponse()
		if kind := h.open(&req, resp, buf); kind != numErrKinds {
			_ = resp.CloseBodyStream()
			fasthttp.ReleaseResponse(resp)
			h.mu.Lock()
			h.errs[kind]++
			h.mu.Unlock()
			continue
		}
		streams[i] = resp
		h.ok.Add(1)
	}
}

// open sends req and waits for the headers and, for an SSE check, the first
// event, all within opts.Timeout; the connection then stays with resp until
// closeAll. The read deadline that bounded the opening has no effect on a
// stream nobody reads.
func (h *idleHolder) open(req *fasthttp.Request, resp *fasthttp.Response, buf []byte) errKind {
	if err := h.client.DoDeadline(req, resp, time.Now().Add(h.opts.Timeout)); err != nil {
		return classify(err)
	}
	if resp.StatusCode() != h.check.status() {
		return kindStatus
	}
	if !h.check.SSE || !resp.IsBodyStream() {
		return numErrKinds
	}
	var sse SSECounter
	for sse.Events() == 0 {
		n, err := resp.BodyStream().Read(buf)
		_, _ = sse.Write(buf[:n])
		if err != nil && sse.Events() == 0 {
			return classifyBody(err)
		}
	}
	return numErrKinds
}

func (h *idleHolder) opened() int { return int(h.ok.Load()) }

func (h *idleHolder) errCounts() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return appendErrCounts(nil, &h.errs)
}

// hold keeps the streams open for opts.Hold while sampling the targets' RSS.
func (h *idleHolder) hold(ctx context.Context, res *IdleResult) error {
	s, err := StartSampler(h.opts.SampleInterval, h.opts.PIDs...)
	if err != nil {
		return err
	}
	t := time.NewTimer(h.opts.Hold)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	u, err := s.Stop()
	if err != nil {
		return err
	}
	res.RSSHeld, res.RSSPeak = u.RSSEnd, u.RSSPeak
	return nil
}

// closeAll ends every held stream; closing an unread body closes its connection.
func closeAll(streams []*fasthttp.Response) {
	for _, s := range streams {
		_ = s.CloseBodyStream()
		fasthttp.ReleaseResponse(s)
	}
}
