package load

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// PacedOptions shape RunPaced. Streams is required; the pacing fields say
// what the target was asked for (the spec's x-sim-* headers), so that the
// result can subtract it.
type PacedOptions struct {
	// Streams is the number of streams, all opened at once (default 1,000).
	Streams int
	// Events is the number of SSE events each stream must carry (default
	// the spec's Check.Events).
	Events int
	// FirstEvent is the pause the target was asked to make before a
	// stream's first event; it is subtracted from the time to first event.
	FirstEvent time.Duration
	// EventDelay is the pause between events; with Events and FirstEvent it
	// sets the default Timeout.
	EventDelay time.Duration
	// OpenConcurrency bounds the streams whose headers are awaited at once
	// (default 256), so that the opening does not flood the listen backlog.
	OpenConcurrency int
	// Timeout bounds each stream, from its request to its last byte
	// (default the stream's length plus 60 s).
	Timeout time.Duration
	// PIDs are the target processes whose CPU and memory are sampled.
	PIDs []int
	// RSSBaseline, when set, is the PIDs' RSS before any stream, the base of
	// the RSS per stream. A process seldom gives memory back: after an
	// earlier run its RSS before the streams already holds what they need.
	RSSBaseline uint64
	// SampleInterval is the sampling period (default 100 ms).
	SampleInterval time.Duration
}

func (o *PacedOptions) ensureDefaults() {
	if o.Streams <= 0 {
		o.Streams = 1000
	}
	if o.OpenConcurrency <= 0 {
		o.OpenConcurrency = 256
	}
	o.OpenConcurrency = min(o.OpenConcurrency, o.Streams)
	if o.Timeout <= 0 {
		o.Timeout = o.FirstEvent + time.Duration(o.Events)*o.EventDelay + time.Minute
	}
	o.Timeout = min(o.Timeout, MaxDuration)
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
}

// PacedResult is what RunPaced measured. CPU and RSS are sums over the PIDs.
type PacedResult struct {
	URL       string            `json:"url"`
	Streams   int               `json:"streams"`   // asked for
	Completed int               `json:"completed"` // streams that carried every event
	Events    uint64            `json:"events"`    // events received, of every stream
	Errors    map[string]uint64 `json:"errors,omitempty"`
	Statuses  map[int]uint64    `json:"statuses,omitempty"`
	Elapsed   time.Duration     `json:"elapsed_ns"`
	FileLimit uint64            `json:"file_limit"`

	// Delay is the time each stamped event took from its send at the
	// simulator to its read here.
	Delay     Summary    `json:"delay"`
	DelayHist *Histogram `json:"delay_hist,omitempty"`
	// FirstEventAdded is each stream's time from its request to its first
	// event, less PacedOptions.FirstEvent.
	FirstEventAdded     Summary    `json:"first_event_added"`
	FirstEventAddedHist *Histogram `json:"first_event_added_hist,omitempty"`

	CPU       time.Duration `json:"cpu_ns"`     // the PIDs' CPU time over the run
	RSSBefore uint64        `json:"rss_before"` // bytes, before the first stream opened
	// RSSBaseline is PacedOptions.RSSBaseline, or RSSBefore.
	RSSBaseline uint64 `json:"rss_baseline"`
	RSSPeak     uint64 `json:"rss_peak"` // bytes, the most seen
	// MaxOpen is the most streams seen open at once by the sampler, and
	// RSSAtMaxOpen the RSS in that sample.
	MaxOpen      int    `json:"max_open"`
	RSSAtMaxOpen uint64 `json:"rss_at_max_open"`
}

// BytesPerStream returns the target's RSS growth over RSSBaseline per open
// stream, at the sample with the most streams open.
func (r *PacedResult) BytesPerStream() float64 {
	base := r.RSSBaseline
	if base == 0 {
		base = r.RSSBefore
	}
	if r.MaxOpen == 0 || r.RSSAtMaxOpen < base {
		return 0
	}
	return float64(r.RSSAtMaxOpen-base) / float64(r.MaxOpen)
}

// CPUPerEvent returns the target's CPU time per event received, in µs.
func (r *PacedResult) CPUPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.CPU.Nanoseconds()) / 1e3 / float64(r.Events)
}

// ErrorCount returns the number of streams that failed.
func (r *PacedResult) ErrorCount() uint64 {
	var n uint64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// delayShards spreads the event delays over this many locked histograms.
const delayShards = 32

// RunPaced opens opts.Streams streams of spec at once, one goroutine each,
// reads every one to its end and measures the delay each event gained from
// its send stamp (see StampScanner) to its read, the time to each stream's
// first event, and the target's CPU per event and RSS per open stream. It
// returns when every stream has ended or failed, each within opts.Timeout.
// A stream fails when it ends with other than opts.Events events or with an
// event that carries no stamp.
func RunPaced(ctx context.Context, spec *Spec, opts PacedOptions) (PacedResult, error) {
	if opts.Events <= 0 {
		opts.Events = spec.Check.Events
	}
	opts.ensureDefaults()
	addr, err := hostAddr(spec.URL)
	if err != nil {
		return PacedResult{}, err
	}
	res := PacedResult{URL: spec.URL, Streams: opts.Streams}
	if res.FileLimit, err = RaiseFileLimit(uint64(opts.Streams + fileMargin)); err != nil {
		return res, fmt.Errorf("cannot open %d streams: %w", opts.Streams, err)
	}
	check := spec.Check
	check.SSE = true
	client, err := newClient(addr, opts.Streams, spec, &check, opts.Timeout)
	if err != nil {
		return res, err
	}
	client.ReadBufferSize, client.WriteBufferSize = 2<<10, 2<<10
	defer client.CloseIdleConnections()
	p := &pacer{client: client, spec: spec, opts: &opts, open: make(chan struct{}, opts.OpenConcurrency),
		first: NewHistogram()}
	for i := range p.delays {
		p.delays[i].h = NewHistogram()
	}
	s := pacedSampler{pids: opts.PIDs, open: &p.streaming, baseline: opts.RSSBaseline}
	if err := s.start(); err != nil {
		return res, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range opts.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stream(ctx, uint64(i))
		}()
	}
	go s.loop(opts.SampleInterval)
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err := s.stop(&res); err != nil {
		return res, err
	}
	p.collect(&res)
	return res, nil
}

// pacer runs the streams of one RunPaced call.
type pacer struct {
	client    *fasthttp.HostClient
	spec      *Spec
	opts      *PacedOptions
	open      chan struct{} // a semaphore on the streams being opened
	streaming atomic.Int64  // streams whose headers came and whose body has not ended
	events    atomic.Uint64
	completed atomic.Int64

	delays [delayShards]struct {
		mu sync.Mutex
		h  *Histogram
	}
	mu       sync.Mutex // guards first, errs, statuses
	first    *Histogram
	errs     [numErrKinds]uint64
	statuses [maxStatus]uint64
}

// stream runs stream seq to its end and records it.
func (p *pacer) stream(ctx context.Context, seq uint64) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	p.spec.BuildRequest(req)
	if p.spec.Mutate != nil {
		p.spec.Mutate(req, seq)
	}
	select {
	case p.open <- struct{}{}:
	case <-ctx.Done():
		return
	}
	start := time.Now()
	err := p.client.DoDeadline(req, resp, start.Add(p.opts.Timeout))
	<-p.open
	if err != nil {
		p.fail(classify(err), 0)
		return
	}
	if resp.StatusCode() != p.spec.Check.status() {
		_ = resp.CloseBodyStream()
		p.fail(kindStatus, resp.StatusCode())
		return
	}
	p.streaming.Add(1)
	kind := p.read(resp, start, seq)
	p.streaming.Add(-1)
	if err := resp.CloseBodyStream(); err != nil && kind == numErrKinds {
		kind = classifyBody(err)
	}
	if kind != numErrKinds {
		p.fail(kind, 0)
		return
	}
	p.completed.Add(1)
}

// read reads the body of a stream opened at start, recording the delay of
// every stamped event; it returns the stream's error kind or numErrKinds.
func (p *pacer) read(resp *fasthttp.Response, start time.Time, seq uint64) errKind {
	if !resp.IsBodyStream() {
		return kindCheck
	}
	var sc StampScanner
	var buf [1 << 10]byte
	body := resp.BodyStream()
	stamps, firstSeen := 0, false
	shard := &p.delays[seq%delayShards]
	for {
		n, err := body.Read(buf[:])
		if n > 0 {
			now := time.Now()
			_, _ = sc.Write(buf[:n])
			st := sc.Take()
			if len(st) > 0 && !firstSeen {
				firstSeen = true
				p.mu.Lock()
				p.first.Record(now.Sub(start) - p.opts.FirstEvent)
				p.mu.Unlock()
			}
			if len(st) > 0 {
				stamps += len(st)
				shard.mu.Lock()
				for _, t := range st {
					shard.h.Record(time.Duration(now.UnixNano() - t))
				}
				shard.mu.Unlock()
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return classifyBody(err)
		}
	}
	p.events.Add(uint64(sc.Events()))
	if sc.Events() != p.opts.Events || stamps != sc.Events() || sc.Malformed() > 0 {
		return kindCheck
	}
	return numErrKinds
}

func (p *pacer) fail(kind errKind, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs[kind]++
	if status > 0 && status < maxStatus {
		p.statuses[status]++
	}
}

// collect fills res with what the streams recorded.
func (p *pacer) collect(res *PacedResult) {
	res.Completed = int(p.completed.Load())
	res.Events = p.events.Load()
	all := NewHistogram()
	for i := range p.delays {
		all.Merge(p.delays[i].h)
	}
	res.Delay, res.DelayHist = all.Summary(), all
	p.mu.Lock()
	defer p.mu.Unlock()
	res.FirstEventAdded, res.FirstEventAddedHist = p.first.Summary(), p.first
	res.Errors = appendErrCounts(nil, &p.errs)
	res.Statuses = appendStatusCounts(nil, &p.statuses)
}

// pacedSampler reads the targets' CPU and RSS with the number of streams
// open, until stopped.
type pacedSampler struct {
	pids     []int
	open     *atomic.Int64
	baseline uint64
	first    ProcStat
	done     chan struct{}
	ended    chan struct{}

	mu      sync.Mutex // guards the fields below
	err     error
	peak    uint64
	maxOpen int
	rssAt   uint64
}

func (s *pacedSampler) start() error {
	s.done, s.ended = make(chan struct{}), make(chan struct{})
	st, err := ReadProcs(s.pids...)
	s.first, s.peak = st, st.RSS
	return err
}

func (s *pacedSampler) loop(interval time.Duration) {
	defer close(s.ended)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.observe()
		}
	}
}

func (s *pacedSampler) observe() {
	open := int(s.open.Load())
	st, err := ReadProcs(s.pids...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		return
	}
	s.peak = max(s.peak, st.RSS)
	if open > s.maxOpen {
		s.maxOpen, s.rssAt = open, st.RSS
	}
}

// stop ends the sampling and fills res's CPU and memory figures.
func (s *pacedSampler) stop(res *PacedResult) error {
	close(s.done)
	<-s.ended
	last, err := ReadProcs(s.pids...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = s.err
	}
	if err != nil {
		return fmt.Errorf("cannot sample the target: %w", err)
	}
	res.CPU = last.CPU - s.first.CPU
	res.RSSBefore, res.RSSPeak = s.first.RSS, max(s.peak, last.RSS)
	res.RSSBaseline = s.baseline
	if res.RSSBaseline == 0 {
		res.RSSBaseline = res.RSSBefore
	}
	res.MaxOpen, res.RSSAtMaxOpen = s.maxOpen, s.rssAt
	return nil
}
