package rawio

import "time"

// Canceler is what a Watch calls when the peer leaves: the upstream call
// that the connection's request waits on (upstream.Cancel).
type Canceler interface {
	// Cancel is called on the watcher's goroutine, at most once per Watch,
	// and must not block.
	Cancel()
}

// WatchAfter is how long a Watch lasts before its socket is registered with
// the watcher's epoll: a wait that ends sooner costs no system call. It is
// watched from then on, so a peer that leaves is noticed at most about
// 2*WatchAfter after the wait began, and at once after that.
const WatchAfter = 20 * time.Millisecond

// Watch is one wait on a connection's peer, see Conn.Watch. It lives in the
// caller's pooled state: the zero value is ready, and Stop makes it so
// again. Conn.Watch and Stop come from one goroutine (the connection's
// server); the watcher reads it under its own lock.
type Watch struct {
	w watchState // see watch_linux.go
}
