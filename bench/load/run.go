// Package load is the load generator of the benchmark harness: it drives one
// loopback HTTP target with a closed loop (N connections back to back) or an
// open loop (a fixed rate, latency from the intended send time), holds many
// idle SSE streams open, and samples the CPU time and memory of the target
// processes from /proc.
//
// It owns measuring, not judging: tables and plots live in bench/report, the
// targets themselves in bench/sim, cmd/gateway and bench/nginx. Every run is
// bounded in time and count and refuses targets that are not loopback.
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

// Defaults and bounds of Options.
const (
	DefaultConnections = 16
	DefaultConcurrency = 256
	DefaultDuration    = 10 * time.Second
	DefaultTimeout     = 10 * time.Second
	// MaxDuration bounds every run, whatever Options say.
	MaxDuration = time.Hour
	// LateThreshold is how far past its intended time an open-loop request
	// may be claimed before it counts in Result.Late.
	LateThreshold = time.Millisecond
)

// ErrBadOptions is returned for options no run can honour.
var ErrBadOptions = errors.New("load: bad options")

// Options bound and shape a run. The zero value is a closed loop of
// DefaultConnections for DefaultDuration.
type Options struct {
	// Rate, when positive, makes an open loop sending this many requests per
	// second; otherwise the loop is closed.
	Rate float64
	// Connections is the number of connections of a closed loop, each one
	// sending its next request when the last one is done.
	Connections int
	// Concurrency caps the requests in flight of an open loop (and so its
	// connections); sends that find no free slot wait, and their latency
	// counts the wait.
	Concurrency int
	// Duration bounds the run: no request starts after it (default 10 s,
	// at most MaxDuration).
	Duration time.Duration
	// MaxRequests, when positive, bounds the number of requests sent.
	MaxRequests uint64
	// Timeout bounds each request, body included (default 10 s).
	Timeout time.Duration
	// Shift, when set, is called once, ShiftAt after the run's start, to
	// change the target mid-run (slow a deployment, say); Result.Groups then
	// count only the calls sent after it returned.
	Shift   func()
	ShiftAt time.Duration
}

func (o *Options) ensureDefaults() {
	if o.Connections <= 0 {
		o.Connections = DefaultConnections
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	o.Duration = min(o.Duration, MaxDuration)
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
}

// workers returns how many workers (and connections) the run uses.
func (o *Options) workers() int {
	n := o.Connections
	if o.Rate > 0 {
		n = o.Concurrency
	}
	if o.MaxRequests > 0 && uint64(n) > o.MaxRequests {
		n = int(o.MaxRequests)
	}
	return n
}

// newClient returns the client of one run: keep-alive connections to addr,
// over TLS for an https spec, no retries, no pipelining.
func newClient(addr string, conns int, spec *Spec, check *Check, timeout time.Duration) (*fasthttp.HostClient, error) {
	isTLS, err := spec.isTLS()
	if err != nil {
		return nil, err
	}
	return &fasthttp.HostClient{
		Addr:                      addr,
		Name:                      "modelgate-load",
		MaxConns:                  conns,
		MaxConnWaitTimeout:        timeout,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		MaxResponseBodySize:       check.maxBody(),
		StreamResponseBody:        check.streams(),
		DisablePathNormalizing:    true,
		IsTLS:                     isTLS,
		TLSConfig:                 spec.TLS,
	}, nil
}

// Run drives the target of spec as opts say and returns what it measured.
// It stops by itself when the duration or count bound is reached, or early
// when ctx is done; requests in flight then finish within opts.Timeout.
func Run(ctx context.Context, spec *Spec, opts Options) (Result, error) {
	opts.ensureDefaults()
	addr, err := hostAddr(spec.URL)
	if err != nil {
		return Result{}, err
	}
	if opts.Rate < 0 {
		return Result{}, fmt.Errorf("cannot run at rate %v: %w", opts.Rate, ErrBadOptions)
	}
	n := opts.workers()
	client, err := newClient(addr, n, spec, &spec.Check, opts.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer client.CloseIdleConnections()

	ws := make([]*worker, n)
	var groupFrom atomic.Int64
	for i := range ws {
		ws[i] = newWorker(client, spec, opts.Timeout)
		if spec.GroupBy != "" {
			ws[i].groups = &groups{by: make(map[string]*Group), from: &groupFrom}
		}
	}
	l := loop{opts: opts}
	start := time.Now()
	l.start, l.end = start, start.Add(opts.Duration)
	done, shiftDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shiftDone)
		shiftAt(&opts, start, &groupFrom, done)
	}()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if opts.Rate > 0 {
				l.open(ctx, w)
			} else {
				l.closed(ctx, w)
			}
		}()
	}
	wg.Wait()
	close(done)
	<-shiftDone // no Shift after Run returns
	return collect(spec, &opts, ws, time.Since(start)), nil
}

// loop hands out request sequence numbers to the workers of one run.
type loop struct {
	opts       Options
	start, end time.Time
	next       atomic.Uint64
}

// claim returns the next sequence number, or false when the count bound is reached.
func (l *loop) claim() (uint64, bool) {
	seq := l.next.Add(1) - 1
	return seq, l.opts.MaxRequests == 0 || seq < l.opts.MaxRequests
}

func (l *loop) closed(ctx context.Context, w *worker) {
	for ctx.Err() == nil && time.Now().Before(l.end) {
		seq, ok := l.claim()
		if !ok {
			return
		}
		w.do(seq, time.Now())
	}
}

// open sends each claimed request at its intended time start+seq/rate, or at
// once if that time has passed. A worker that claims a request after its
// intended time was kept busy by the target (every worker was), so latency
// counts from the intended time and a stalled target cannot hide its stall
// (coordinated omission). A worker that claims it early sleeps until then
// and counts from its wake-up: the runtime's timers wake up to a millisecond
// late when idle (netpoll waits in whole ms), and that slop is the
// generator's, not the target's.
func (l *loop) open(ctx context.Context, w *worker) {
	interval := float64(time.Second) / l.opts.Rate
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for ctx.Err() == nil {
		seq, ok := l.claim()
		if !ok {
			return
		}
		intended := l.start.Add(time.Duration(float64(seq) * interval))
		if !intended.Before(l.end) {
			return
		}
		start := intended
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return
			}
			start = time.Now()
		} else if -d > LateThreshold {
			w.late++
		}
		w.do(seq, start)
	}
}

// collect merges the workers' counts and histograms into one Result.
func collect(spec *Spec, opts *Options, ws []*worker, elapsed time.Duration) Result {
	r := Result{
		Mode:        "closed",
		URL:         spec.URL,
		Connections: len(ws),
		Elapsed:     elapsed,
		LatencyHist: NewHistogram(),
		TTFBHist:    NewHistogram(),
	}
	if opts.Rate > 0 {
		r.Mode, r.Rate = "open", opts.Rate
	}
	var failed uint64
	for _, w := range ws {
		r.OK += w.ok
		r.Late += w.late
		r.Bytes += w.bytes
		r.Events += w.events
		for _, n := range w.errs {
			failed += n
		}
		r.Errors = appendErrCounts(r.Errors, &w.errs)
		r.Statuses = appendStatusCounts(r.Statuses, &w.statuses)
		r.LatencyHist.Merge(w.lat)
		r.TTFBHist.Merge(w.ttfb)
		if w.groups != nil {
			r.Groups = mergeGroups(r.Groups, w.groups.by)
		}
	}
	r.Requests = r.OK + failed
	r.finish()
	return r
}
