package upstream

import "time"

// Excluded reports whether the deployment is in its cooldown after failures
// at now (unix nanoseconds).
func (d *Deployment) Excluded(now int64) bool {
	return d.downUntil.Load() > now
}

// Succeeded records an answer that was not an upstream failure.
func (d *Deployment) Succeeded() {
	if d.failures.Load() != 0 {
		d.failures.Store(0)
	}
	// An exclusion that is over is cleared, so picks stop reading the clock
	// for it; one still running is left alone (the answer may predate it).
	if until := d.downUntil.Load(); until != 0 && until <= time.Now().UnixNano() {
		d.downUntil.CompareAndSwap(until, 0)
	}
}

// Failed records a failure; enough in a row exclude the deployment for the
// cooldown. It reports whether this call excluded it.
func (d *Deployment) Failed() bool {
	if d.failures.Add(1) < d.maxFailures {
		return false
	}
	d.failures.Store(0)
	d.downUntil.Store(time.Now().Add(d.cooldown).UnixNano())
	return true
}

// FailureStatus reports whether an upstream status counts against the
// deployment's health: server errors and overload, not the caller's mistakes.
func FailureStatus(status int) bool {
	return status >= 500 && status != 501 && status != 505
}

// ExcludeFor excludes the deployment for d from now, unless an exclusion
// already runs longer: a rate-limited deployment is routed around at once.
func (d *Deployment) ExcludeFor(dur time.Duration) {
	until := time.Now().Add(dur).UnixNano()
	for {
		cur := d.downUntil.Load()
		if cur >= until || d.downUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}
