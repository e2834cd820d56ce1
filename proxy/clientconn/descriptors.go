package clientconn

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelgate/gateway/proxy/upstream"
)

// The process's file descriptors (RLIMIT_NOFILE). A stream holds two: its
// client connection and its upstream one. Were client connections accepted
// while a descriptor is left, the upstream dial of the last ones would fail
// with "too many open files", which reads as the deployment's failure and
// excludes it. So a client connection is counted as two descriptors, the
// upstream connection it may need as well as its own, and one that would
// bring the tally within fdReserve of the limit is closed as soon as it is
// accepted (gateway_client_connections_refused_total): the descriptors of
// the upstream dials are kept.
//
// The connections are counted as they open and close (no system call per
// accept); what no counter sees (listeners, the store's files, Redis and
// object storage connections, the log) is counted from /proc/self/fd, at
// start and then, at most every recountEvery, while the tally is near the
// limit.

// descriptors tallies the process's file descriptors. The zero value is
// ready (no limit known: everything is admitted); safe for concurrent use.
type descriptors struct {
	// clients are the client connections open, from every client listener;
	// others the other connections accepted (admin listeners).
	clients, others atomic.Int64
	// limit is RLIMIT_NOFILE's soft limit, 0 while unknown; base the
	// descriptors open that no counter sees, as of the last count, at
	// (unix nanoseconds).
	limit, base, at atomic.Int64
	counting        sync.Mutex // one count at a time
}

// procFDs is the process's tally: descriptors are the process's, shared by
// every gateway in it.
var procFDs descriptors

// recountEvery bounds how often the open descriptors are counted from the
// system while the tally is near the limit. A count reads one directory
// entry per descriptor open.
var recountEvery = time.Second

// fdReserve is the descriptors kept free of connections, for what no
// counter sees: 64, or a hundredth of limit when that is more.
func fdReserve(limit int64) int64 { return max(64, limit/100) }

// need returns the descriptors the process may come to hold with
// newClients more client connections, when busy of its upstream connections
// serve calls: those open that no counter sees, the connections accepted,
// an upstream connection for each client one (a client's call holds one),
// and the idle upstream connections of the pools besides.
func (d *descriptors) need(newClients, busy int64) int64 {
	clients := d.clients.Load() + newClients
	up := upstream.OpenConns()
	return d.base.Load() + d.others.Load() + 2*clients + up - min(max(busy, 0), up)
}

// admitClient reports whether a client connection just accepted may stay,
// and counts it when so. busy returns the upstream connections that serve
// calls; it is asked only near the limit, where the descriptors open are
// counted first (at most every recountEvery).
func (d *descriptors) admitClient(now time.Time, busy func() int64) bool {
	limit := d.limit.Load()
	if limit <= 0 || d.need(1, 0)+2*fdReserve(limit) <= limit {
		d.clients.Add(1)
		return true
	}
	if now.UnixNano()-d.at.Load() >= int64(recountEvery) {
		d.count(now)
		limit = d.limit.Load()
	}
	if d.need(1, busy())+fdReserve(limit) > limit {
		return false
	}
	d.clients.Add(1)
	return true
}

// count reads the limit and counts the descriptors open that no counter
// sees. It does nothing while another count runs; the base stays as it was
// when the count fails (no descriptor is free to read the directory).
func (d *descriptors) count(now time.Time) {
	if !d.counting.TryLock() {
		return
	}
	defer d.counting.Unlock()
	d.at.Store(now.UnixNano())
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		d.limit.Store(int64(min(lim.Cur, math.MaxInt64)))
	}
	counted := d.clients.Load() + d.others.Load() + upstream.OpenConns()
	if n, err := openDescriptors(); err == nil {
		d.base.Store(max(0, n-counted))
	}
}

// full says that the process ran out of descriptors (an accept failed with
// EMFILE): the tally is moved to the limit, so that client connections are
// refused until some close or a count finds descriptors free.
func (d *descriptors) full() {
	limit := d.limit.Load()
	if limit <= 0 {
		return
	}
	counted := d.clients.Load() + d.others.Load() + upstream.OpenConns()
	d.base.Store(max(d.base.Load(), limit-counted))
	d.at.Store(0) // the next admission near the limit counts again
}

// openDescriptors counts the process's open file descriptors, as the
// Prometheus process metrics do (VictoriaMetrics/metrics
// getOpenFDsCount): the entries of /proc/self/fd, less the one that reads it.
func openDescriptors() (int64, error) {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		names, err := f.Readdirnames(512)
		n += int64(len(names))
		if errors.Is(err, io.EOF) {
			return n - 1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// outOfDescriptors reports whether err says the process or the system has
// no descriptor left.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// LogDescriptors counts the descriptors open and logs the limit in force and
// the client connections it leaves room for. Go raises the soft limit to
// the hard one (less one) when the process starts (package syscall), so the
// limit is the hard one as set by the service manager (LimitNOFILE).
func LogDescriptors(log *slog.Logger) {
	procFDs.count(time.Now())
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the file descriptor limit: client connections are not limited by it", "error", err.Error())
		return
	}
	limit := procFDs.limit.Load()
	reserve := fdReserve(limit)
	open := procFDs.need(0, 0)
	log.Info("file descriptors", "limit", limit, "hard_limit", lim.Max, "open", open,
		"reserve", reserve, "client_connections_max", max(0, limit-reserve-open)/2)
}

// OpenClients returns the client connections open in the process
// (gateway_client_connections).
func OpenClients() int64 { return procFDs.clients.Load() }

// CountDescriptors reads the descriptor limit and counts the descriptors
// open now, as at start and near the limit; a test that changes
// RLIMIT_NOFILE calls it.
func CountDescriptors() { procFDs.count(time.Now()) }

// DescriptorLimit returns the soft RLIMIT_NOFILE as of the last count, 0
// while unknown.
func DescriptorLimit() int64 { return procFDs.limit.Load() }

// OpenDescriptors counts the process's open file descriptors from
// /proc/self/fd.
func OpenDescriptors() (int64, error) { return openDescriptors() }

// SetRecountEvery sets how often, at most, the descriptors open are counted
// near the limit, and returns the setting it replaces. For tests only (0:
// at every accept near the limit); not safe while connections are accepted.
func SetRecountEvery(d time.Duration) time.Duration {
	old := recountEvery
	recountEvery = d
	return old
}
