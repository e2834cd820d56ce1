package proxy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Resumers run held streams' steps (see hijack.go): a stream's start, and
// each Wake of its parked upstream connection. A step is an event or a few:
// a read from the upstream, a write to the client, microseconds. The steps
// wait in a run queue, and a few resumers take them one after another, on
// stacks already grown for them, as an event loop would: a burst of a
// thousand events is not a thousand goroutines started, each growing its
// stack from the smallest.
//
// A step can block, though: the client's socket may not take its write, for
// up to timeouts.client_write_idle. So the resumers running are bounded only
// softly (resumersSoft): while steps wait and every resumer is running, a
// watchdog checks every resumeStall that the queue moved, and starts one more
// resumer when it did not. Steps that the running ones leave waiting wait
// resumeStall at most for each one blocked.

// resumeStall is how long the run queue may stand still, steps in it and
// every resumer running, before one more resumer starts.
const resumeStall = time.Millisecond

// maxIdleResumers bounds the resumers kept waiting for steps; past it a
// resumer with nothing to run ends.
const maxIdleResumers = 8

// resumersSoft is how many resumers run before a step waits in the queue
// rather than start one more: enough to keep every P busy with steps.
var resumersSoft = max(4, 2*runtime.GOMAXPROCS(0))

var theResumers = newResumers(resumersSoft)

func newResumers(soft int) *resumers {
	r := &resumers{soft: soft}
	r.work.L = &r.mu
	return r
}

// step is what a resumer runs: a held stream's writeStream.
type step interface{ step() }

func (hs *heldStream) step() { hs.writeStream() }

// resumers is the run queue and its resumers.
type resumers struct {
	mu      sync.Mutex
	work    sync.Cond
	soft    int    // see resumersSoft
	queue   []step // steps waiting, from head on
	head    int
	running int    // resumers running a step, or about to take one
	idle    int    // resumers waiting on work
	taken   uint64 // steps taken from the queue, for the watchdog
	seen    uint64 // taken when the watchdog was set
	dog     *time.Timer
	dogSet  bool
	// started counts the resumers started (for the benchmarks).
	started atomic.Uint64
}

// resumeStream has hs's next step run on a resumer, without waiting.
func resumeStream(hs *heldStream) { theResumers.add(hs) }

func (r *resumers) add(hs step) {
	r.mu.Lock()
	r.queue = append(r.queue, hs)
	switch {
	case r.idle > 0:
		r.work.Signal()
	case r.running < r.soft:
		r.start()
	case !r.dogSet:
		r.setDog()
	}
	r.mu.Unlock()
}

// start starts a resumer; under mu.
func (r *resumers) start() {
	r.running++
	r.started.Add(1)
	go r.run()
}

// setDog sets the watchdog; under mu.
func (r *resumers) setDog() {
	r.dogSet, r.seen = true, r.taken
	if r.dog == nil {
		r.dog = time.AfterFunc(resumeStall, r.watch)
	} else {
		r.dog.Reset(resumeStall)
	}
}

// watch is the watchdog: steps wait and none was taken since it was set, so
// every resumer is blocked; one more starts.
func (r *resumers) watch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dogSet = false
	if r.head == len(r.queue) {
		return
	}
	if r.taken == r.seen {
		r.start()
	}
	r.setDog()
}

// run is a resumer: it runs the steps of the queue, and waits for more,
// or ends when enough others wait.
func (r *resumers) run() {
	for {
		s := r.next()
		if s == nil {
			return
		}
		s.step()
	}
}

// next takes the next step, waiting for one; nil when the resumer is to end.
func (r *resumers) next() step {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.head == len(r.queue) {
		if r.idle >= maxIdleResumers {
			r.running--
			return nil
		}
		r.running--
		r.idle++
		r.work.Wait()
		r.idle--
		r.running++
	}
	s := r.queue[r.head]
	r.queue[r.head] = nil
	r.head++
	r.taken++
	switch {
	case r.head == len(r.queue):
		r.queue, r.head = r.queue[:0], 0
	case r.head >= 64 && 2*r.head >= len(r.queue):
		// A queue that never empties under load: its taken half goes.
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
	return s
}
