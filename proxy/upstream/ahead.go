package upstream

import (
	"io"
	"sync"
)

// A streamed answer holds its upstream connection until it is read to its
// end, and the relay reads only as fast as the client takes what it writes:
// a client that stops reading would keep a finished answer, and its
// connection, out of the pool until timeouts.client_write_idle. So when a
// write to the client finds no room (the client's connection tells, see
// Stalls; no system call of the relay's own), the relay starts a read-ahead:
// a goroutine reads the rest of the answer into a pooled buffer of the
// deployment's bound (limits.max_held_answer_bytes) while the relay waits on
// the client. An answer whose rest fits is read to its end, which hands the
// connection back to the pool and ends the call's in-flight count; the
// client gets it from the buffer at its own pace. A longer rest fills the
// buffer and the read-ahead stops there: the connection stays with the call,
// as before. The relay reads what the read-ahead holds before the body
// again, and stops it once it has caught up, so a client that reads again
// is served as the answer comes, not as the buffer fills.
//
// A client that reads promptly never stalls, and pays nothing: a nil check
// per read, and a pointer in the Relay (the read-ahead is pooled apart).

// Stalls is a client connection that can say when a write to it finds no
// room (see Relay.SetTail).
type Stalls interface {
	// OnStall has a write that finds the connection's buffer full call *f,
	// on the writing goroutine and before it waits; nil stops it.
	OnStall(f *func())
}

// sharedBody is a streamed body that a read-ahead can read on a goroutine
// of its own (see the wire's answerBody.Share).
type sharedBody interface {
	io.Reader
	Share()
	Unshare()
	Cut()
	RestFits(n int) bool
}

// readAhead is a Relay's read-ahead, pooled apart from the Relay (a relay
// whose client reads promptly never takes one): taken when one starts, given
// back when it ends (Relay.finishAhead). body and dep are the relay
// goroutine's; the rest is under mu while the read-ahead's goroutine runs.
// mu and cond are never reset: a readAhead is given back only once its
// goroutine is done with them.
type readAhead struct {
	body sharedBody
	dep  *Deployment

	mu   sync.Mutex
	cond sync.Cond // on mu: bytes read, or the goroutine done
	buf  *[]byte   // pooled; holds (*buf)[off:n]
	off  int
	n    int
	err  error // the body's read error, io.EOF at its end
	// running is set while the goroutine reads; stop asks it to stop after
	// its read. ended: the body was read to its end (its connection is let
	// go and its in-flight count ended).
	running, stop, ended bool
}

var aheadPool = sync.Pool{New: func() any {
	a := new(readAhead)
	a.cond.L = &a.mu
	return a
}}

// heldBufs are read-ahead buffers; one of another size than the bound in
// force is dropped.
var heldBufs sync.Pool

// stalled starts a read-ahead of the streamed answer, when there is none and
// its rest may fit the deployment's bound. It is the client connection's
// OnStall function: it runs inside a write to the client.
func (r *Relay) stalled() {
	if r.ahead != nil || r.broken || r.stream == nil || r.dep.maxHeld <= 0 {
		return
	}
	body, ok := r.stream.(sharedBody)
	if !ok || !body.RestFits(r.dep.maxHeld) {
		return
	}
	a := aheadPool.Get().(*readAhead)
	a.buf, _ = heldBufs.Get().(*[]byte)
	if a.buf == nil || len(*a.buf) != r.dep.maxHeld {
		b := make([]byte, r.dep.maxHeld)
		a.buf = &b
	}
	a.body, a.dep = body, r.dep
	a.off, a.n, a.err, a.running, a.stop, a.ended = 0, 0, nil, true, false, false
	r.ahead = a
	body.Share()
	go a.run()
}

// run reads the body into the buffer until its end, an error, a full buffer
// or a stop.
func (a *readAhead) run() {
	buf := *a.buf
	a.mu.Lock()
	for !a.stop && a.n < len(buf) {
		n := a.n
		a.mu.Unlock()
		m, err := a.body.Read(buf[n:])
		a.mu.Lock()
		a.n += m
		if err == io.EOF {
			a.ended = true
			a.dep.inflight.Add(-1)
		}
		if err != nil {
			a.err = err
			break
		}
		a.cond.Broadcast()
	}
	a.running = false
	a.cond.Broadcast()
	a.mu.Unlock()
}

// read reads into p what the read-ahead holds, waiting for the goroutine
// when it holds nothing yet, and stopping it then: the relay has caught up.
// done says that the read-ahead is spent: it holds nothing more and its
// goroutine is gone; err is then the body's error, if it had one.
func (a *readAhead) read(p []byte) (n int, done bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.off == a.n && a.running {
		a.stop = true
		a.cond.Wait()
	}
	if a.off < a.n {
		n = copy(p, (*a.buf)[a.off:a.n])
		a.off += n
		return n, false, nil
	}
	return 0, true, a.err
}

// ready reports whether read returns bytes without waiting.
func (a *readAhead) ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.off < a.n
}

// halt stops the goroutine at once (a read it waits in is cut short by
// closing the connection, unless the body was read to its end) and waits
// for it.
func (a *readAhead) halt() {
	a.mu.Lock()
	running := a.running
	a.stop = true
	a.mu.Unlock()
	if running {
		a.body.Cut()
	}
	a.mu.Lock()
	for a.running {
		a.cond.Wait()
	}
	a.mu.Unlock()
}

// finishAhead ends a spent or halted read-ahead: the body is the relay's
// again, and the read-ahead goes back to its pool (its goroutine is done).
func (r *Relay) finishAhead() {
	a := r.ahead
	a.body.Unshare()
	heldBufs.Put(a.buf)
	if a.ended {
		r.aheadEnded = true
	}
	a.body, a.dep, a.buf, a.err = nil, nil, nil, nil
	a.off, a.n, a.ended = 0, 0, false
	r.ahead = nil
	aheadPool.Put(a)
}

// readBody reads the upstream body: from the read-ahead while there is one.
func (r *Relay) readBody(p []byte) (int, error) {
	if a := r.ahead; a != nil {
		n, done, err := a.read(p)
		if !done {
			return n, nil
		}
		r.finishAhead()
		if err != nil {
			return 0, err
		}
	}
	return r.stream.Read(p)
}

// watchStalls has the client's connection c start a read-ahead when a write
// to it finds no room; the deployment's bound decides whether one may.
func (r *Relay) watchStalls(c Stalls) {
	if r.dep == nil || r.dep.maxHeld <= 0 {
		return
	}
	if r.onStall == nil {
		r.onStall = r.stalled // one method value per Relay, not per call
	}
	r.client = c
	c.OnStall(&r.onStall)
}

// endAhead stops watching the client's stalls and ends any read-ahead, its
// goroutine halted first. It reports whether the read-ahead read the body
// to its end (the in-flight count is then ended).
func (r *Relay) endAhead() bool {
	if r.client != nil {
		r.client.OnStall(nil)
		r.client = nil
	}
	if r.ahead != nil {
		r.ahead.halt()
		r.finishAhead()
	}
	ended := r.aheadEnded
	r.aheadEnded = false
	return ended
}
