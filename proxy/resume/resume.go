package resume

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stall is how long the run queue may stand still, steps in it and every
// resumer running, before one more resumer starts.
const Stall = time.Millisecond

// maxIdle bounds the resumers kept waiting for steps; past it a resumer with
// nothing to run ends.
const maxIdle = 8

// Step is what a resumer runs.
type Step interface{ Step() }

// Pool is a run queue and its resumers. Safe for concurrent use.
type Pool struct {
	soft    int // resumers running before a step waits rather than start one more
	mu      sync.Mutex
	work    sync.Cond
	queue   []Step // steps waiting, from head on
	head    int
	running int    // resumers running a step, or about to take one
	idle    int    // resumers waiting on work
	taken   uint64 // steps taken from the queue, for the watchdog
	seen    uint64 // taken when the watchdog was set
	dog     *time.Timer
	dogSet  bool
	started atomic.Uint64
}

// New returns a pool that starts up to soft resumers before a step waits in
// the queue for one (enough to keep every P busy with steps).
func New(soft int) *Pool {
	p := &Pool{soft: soft}
	p.work.L = &p.mu
	return p
}

// Started returns how many resumers the pool started (for the benchmarks).
func (p *Pool) Started() uint64 { return p.started.Load() }

// Add has s run on a resumer, without waiting.
func (p *Pool) Add(s Step) {
	p.mu.Lock()
	p.queue = append(p.queue, s)
	switch {
	case p.idle > 0:
		p.work.Signal()
	case p.running < p.soft:
		p.start()
	case !p.dogSet:
		p.setDog()
	}
	p.mu.Unlock()
}

// start starts a resumer; under mu.
func (p *Pool) start() {
	p.running++
	p.started.Add(1)
	go p.run()
}

// setDog sets the watchdog; under mu.
func (p *Pool) setDog() {
	p.dogSet, p.seen = true, p.taken
	if p.dog == nil {
		p.dog = time.AfterFunc(Stall, p.watch)
	} else {
		p.dog.Reset(Stall)
	}
}

// watch is the watchdog: steps wait and none was taken since it was set, so
// every resumer is blocked; one more starts.
func (p *Pool) watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dogSet = false
	if p.head == len(p.queue) {
		return
	}
	if p.taken == p.seen {
		p.start()
	}
	p.setDog()
}

// run is a resumer: it runs the steps of the queue, and waits for more, or
// ends when enough others wait.
func (p *Pool) run() {
	for {
		s := p.next()
		if s == nil {
			return
		}
		s.Step()
	}
}

// next takes the next step, waiting for one; nil when the resumer is to end.
func (p *Pool) next() Step {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head == len(p.queue) {
		if p.idle >= maxIdle {
			p.running--
			return nil
		}
		p.running--
		p.idle++
		p.work.Wait()
		p.idle--
		p.running++
	}
	s := p.queue[p.head]
	p.queue[p.head] = nil
	p.head++
	p.taken++
	switch {
	case p.head == len(p.queue):
		p.queue, p.head = p.queue[:0], 0
	case p.head >= 64 && 2*p.head >= len(p.queue):
		// A queue that never empties under load: its taken half goes.
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	return s
}
