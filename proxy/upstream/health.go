package upstream

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Excluded reports whether the deployment is in its cooldown after failures
// at now (unix nanoseconds).
func (d *Deployment) Excluded(now int64) bool {
	return d.downUntil.Load() > now
}

// ExcludedNow reports whether the deployment is in its cooldown now; it
// reads the clock only when the deployment has been excluded.
func (d *Deployment) ExcludedNow() bool {
	u := d.downUntil.Load()
	return u != 0 && u > time.Now().UnixNano()
}

// Succeeded records an answer that was not an upstream failure.
func (d *Deployment) Succeeded() {
	if d.failures.Load() != 0 {
		d.failures.Store(0)
	}
	// An exclusion that is over is cleared, so picks stop reading the clock
	// for it; one still running is left alone (the answer may predate it).
	if until := d.downUntil.Load(); until != 0 && until <= time.Now().UnixNano() {
		if d.downUntil.CompareAndSwap(until, 0) {
			d.logHealth(&d.lastBackLog, "deployment back in service: it answered after its cooldown", nil)
		}
	}
}

// Failed records a failure whose cause is err (a transport error, a
// StatusError, an interrupted stream); enough in a row exclude the deployment
// for the cooldown, which is logged with the cause. It reports whether this
// call excluded it.
//
// A failure of this process to open a descriptor (EMFILE, ENFILE: the
// gateway is at its file limit) says nothing of the deployment and is not
// counted: excluding every deployment in turn would fail calls that the
// limit would let through once a connection closes.
func (d *Deployment) Failed(err error) bool {
	if outOfDescriptors(err) {
		return false
	}
	if d.failures.Add(1) < d.maxFailures {
		return false
	}
	d.failures.Store(0)
	d.downUntil.Store(time.Now().Add(d.cooldown).UnixNano())
	d.logHealth(&d.lastDownLog, "deployment excluded after failures in a row", err)
	return true
}

// outOfDescriptors reports whether err is this process running out of file
// descriptors, its own limit or the system's.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// StatusError is an upstream answer whose status counts as a failure.
type StatusError int

func (e StatusError) Error() string { return "upstream answered " + strconv.Itoa(int(e)) }

// FailureStatus reports whether an upstream status counts against the
// deployment's health: server errors and overload, not the caller's mistakes.
func FailureStatus(status int) bool {
	return status >= 500 && status != 501 && status != 505
}

// LogEvery is the least time between two log lines of one kind (excluded,
// back) of one deployment; the lines in between are counted in the next.
const LogEvery = 10 * time.Second

// SetLogger sets where the deployment logs its exclusions and recoveries; nil
// (the default) logs nothing. Safe to call while the deployment serves.
func (d *Deployment) SetLogger(l *slog.Logger) { d.log.Store(l) }

// logHealth logs one health change, at most once per LogEvery per kind. The
// line names the deployment, never its key or URL.
func (d *Deployment) logHealth(last *throttle, msg string, cause error, extra ...any) {
	l := d.log.Load()
	if l == nil {
		return
	}
	skipped, ok := last.allow(time.Now().UnixNano(), int64(d.logEvery))
	if !ok {
		return
	}
	attrs := []any{"deployment", d.name, "family", d.family.String()}
	if cause != nil && len(extra) == 0 {
		attrs = append(attrs, "failures", d.maxFailures)
	}
	attrs = append(attrs, extra...)
	if cause != nil {
		attrs = append(attrs, "cooldown", d.cooldown.String(), "cause", causeText(cause))
	}
	if skipped > 0 {
		attrs = append(attrs, "unlogged_before", skipped)
	}
	l.Warn(msg, attrs...)
}

// causeText is what a health log line says of a failure: a status, a dial
// error (which names only the address) or a timeout as they are, anything
// else by a fixed word, since an error from reading an answer may quote the
// answer's bytes.
func causeText(err error) string {
	var se StatusError
	var oe *net.OpError
	switch {
	case errors.As(err, &se):
		return err.Error()
	case errors.As(err, &oe) && oe.Op == "dial":
		return err.Error()
	case IsTimeout(err):
		return "timeout"
	}
	return "upstream_error"
}

// ExcludedUntil returns when the deployment's current exclusion ends, or the
// zero time when it has none at now (unix nanoseconds).
func (d *Deployment) ExcludedUntil(now int64) time.Time {
	if until := d.downUntil.Load(); until > now {
		return time.Unix(0, until)
	}
	return time.Time{}
}

// ExcludeFor excludes the deployment for d from now, unless an exclusion
// already runs longer: a rate-limited deployment is routed around at once.
// A health probe that succeeds does not end this exclusion early: the
// provider said when to come back.
func (d *Deployment) ExcludeFor(dur time.Duration) {
	until := time.Now().Add(dur).UnixNano()
	raise(&d.limitedUntil, until)
	raise(&d.downUntil, until)
}

// raise sets v to until unless it already holds a later time.
func raise(v *atomic.Int64, until int64) {
	for {
		cur := v.Load()
		if cur >= until || v.CompareAndSwap(cur, until) {
			return
		}
	}
}
