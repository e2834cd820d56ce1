package upstream

import "sync/atomic"

// throttle lets one event through per interval and counts the others. The
// zero value lets the first event through. Safe for concurrent use.
type throttle struct {
	last    atomic.Int64 // unix nanoseconds of the last event let through; 0: none
	skipped atomic.Int64
}

// allow reports whether an event at now may pass, and how many were held back
// since the last one that did.
func (t *throttle) allow(now, interval int64) (skipped int64, ok bool) {
	last := t.last.Load()
	if last != 0 && now-last < interval || !t.last.CompareAndSwap(last, now) {
		t.skipped.Add(1)
		return 0, false
	}
	return t.skipped.Swap(0), true
}
