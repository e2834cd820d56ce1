package upstream

import "sync/atomic"

// Budget bounds the retries away from one deployment to a share of the calls
// it was sent over the last budgetWindow seconds, with a floor of a few per
// second, as Envoy's retry budget does: when a provider fails every call,
// failover adds at most that share of traffic to the others instead of
// doubling it. The zero value is ready; safe for concurrent use.
//
// The window is budgetWindow one-second buckets reused in a ring; a bucket
// is cleared by the first call of its new second, so a count racing with
// that clearing may be lost: the budget is approximate by a few calls.
type Budget struct {
	buckets [budgetWindow]budgetBucket
}

const budgetWindow = 10

type budgetBucket struct {
	sec     atomic.Int64
	calls   atomic.Int64
	retries atomic.Int64
}

// bucket returns the bucket of second now, cleared if it held an older one.
func (b *Budget) bucket(now int64) *budgetBucket {
	k := &b.buckets[now%budgetWindow]
	if s := k.sec.Load(); s != now && k.sec.CompareAndSwap(s, now) {
		k.calls.Store(0)
		k.retries.Store(0)
	}
	return k
}

func (b *Budget) called(now int64) { b.bucket(now).calls.Add(1) }

// Allows reports whether a retry fits: the retries of the window stay below
// percent of its calls, or below minPerSecond a second. It does not spend.
func (b *Budget) Allows(now int64, percent, minPerSecond int) bool {
	var calls, retries int64
	for i := range b.buckets {
		k := &b.buckets[i]
		if s := k.sec.Load(); s > now-budgetWindow && s <= now {
			calls += k.calls.Load()
			retries += k.retries.Load()
		}
	}
	return retries < max(calls*int64(percent)/100, int64(minPerSecond)*budgetWindow)
}

// Spend records a retry at second now.
func (b *Budget) Spend(now int64) { b.bucket(now).retries.Add(1) }
