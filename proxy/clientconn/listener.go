package clientconn

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// A listener's Accept fails for want of a descriptor (EMFILE, ENFILE), of
// memory (ENOBUFS, ENOMEM) or because the client left first (ECONNABORTED).
// fasthttp's Server.Serve returns on any such error but a timeout, which would
// end the server and, with it, every stream it serves. So the gateway's
// listeners never hand it one: an accept that fails is counted
// (gateway_accept_errors_total), logged at most once per acceptLogEvery, and
// tried again after a pause, 5 ms doubling up to 1 s, as net/http's
// Server.Serve does. Only the listener's close ends Accept.

// Bounds of the pause before an accept is tried again.
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
	acceptLogEvery = 10 * time.Second
)

// acceptor is a listener whose accept retries what fails (see above) until
// the listener is closed. Safe for concurrent use.
type acceptor struct {
	net.Listener
	name   string // the listener's label: client or admin
	errs   *metrics.Counter
	log    *slog.Logger
	done   chan struct{} // closed by Close: a pause ends at once
	closer sync.Once
	// loggedAt is when an error was last logged (unix nanoseconds);
	// unlogged counts the errors since.
	loggedAt, unlogged atomic.Int64
}

// init sets a up to accept on ln; name labels its logged errors, counted in
// errs.
func (a *acceptor) init(ln net.Listener, name string, errs *metrics.Counter, log *slog.Logger) {
	a.Listener, a.name, a.errs, a.log, a.done = ln, name, errs, log, make(chan struct{})
}

// accept returns the next connection, or the error of a closed listener.
func (a *acceptor) accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := a.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if closedListener(err) {
			return nil, err
		}
		a.errs.Inc()
		if outOfDescriptors(err) {
			procFDs.full()
		}
		a.logError(err)
		delay = min(max(2*delay, acceptDelayMin), acceptDelayMax)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-a.done:
			t.Stop()
			return nil, net.ErrClosed
		}
	}
}

// logError logs err unless one was logged within acceptLogEvery; the line
// says how many were not. An accept's error names the listener's address
// and the system's error, nothing a client sent.
func (a *acceptor) logError(err error) {
	now := time.Now().UnixNano()
	last := a.loggedAt.Load()
	if now-last < int64(acceptLogEvery) || !a.loggedAt.CompareAndSwap(last, now) {
		a.unlogged.Add(1)
		return
	}
	a.log.Warn("cannot accept a connection: trying again; the server keeps serving",
		"listener", a.name, "error", err.Error(), "errors_not_logged", a.unlogged.Swap(0))
}

// Close closes the listener and ends a pause of Accept.
func (a *acceptor) Close() error {
	a.closer.Do(func() { close(a.done) })
	return a.Listener.Close()
}

// closedListener reports whether err is a closed listener's: net.ErrClosed,
// or what fasthttp's Serve reads as one (io.EOF, fasthttputil's in-memory
// listener).
func closedListener(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "use of closed network connection")
}

// AdminListener wraps ln, the admin listener, so that a failed accept does
// not end its server (see acceptor), its failures counted in errs; the
// connections it accepts count among the process's descriptors (see
// descriptors).
func AdminListener(ln net.Listener, errs *metrics.Counter, log *slog.Logger) net.Listener {
	l := new(adminListener)
	l.init(ln, "admin", errs, log)
	return l
}

type adminListener struct{ acceptor }

func (l *adminListener) Accept() (net.Conn, error) {
	c, err := l.accept()
	if err != nil {
		return nil, err
	}
	procFDs.others.Add(1)
	fc := &fdConn{Conn: c}
	fc.counted.Store(true)
	return fc, nil
}

// fdConn is an accepted connection counted in procFDs.others until its
// first Close.
type fdConn struct {
	net.Conn
	counted atomic.Bool
}

func (c *fdConn) Close() error {
	if c.counted.Swap(false) {
		procFDs.others.Add(-1)
	}
	return c.Conn.Close()
}
