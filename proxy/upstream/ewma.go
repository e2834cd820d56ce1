package upstream

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// DefaultDecay is the decay constant of a deployment's peak-EWMA time to
// first byte when the config sets none (routing.decay).
const DefaultDecay = 10 * time.Second

// unsampledCost is the cost of a deployment that has calls in flight but no
// time to first byte yet, plus its in-flight count: it gets no more calls
// until its first answer's head tells how fast it is (Finagle's penalty).
const unsampledCost = float64(time.Hour)

// peakEWMA is a deployment's time to first byte, as Finagle's and Linkerd's
// peak-EWMA balancers keep it: a sample above the average replaces it at
// once, one below pulls it down by 1-exp(-Δt/τ), Δt being the time since the
// last sample; read, the average decays towards zero by exp(-Δt/τ), so a
// deployment that lost its calls for being slow is tried again after a few τ
// and wins them back if it has recovered.
//
// The zero value holds no sample; safe for concurrent use without a lock.
// The average and its time are two atomics: two samples at once may lose
// one, and a reader may pair one's average with the other's time. Either is
// off by at most one sample's weight, which the next sample repairs; a
// balancer tolerates that, and a lock on each call's path would cost more.
type peakEWMA struct {
	bits  atomic.Uint64 // math.Float64bits of the average in nanoseconds; 0: no sample yet
	stamp atomic.Int64  // when bits was last set, in monoNow's nanoseconds
	tau   atomic.Int64  // the decay constant in nanoseconds; 0: DefaultDecay
}

// monoNow is the time in nanoseconds on the monotonic clock: a change of the
// wall clock does not age or rejuvenate an average. It is the wire's clock,
// on which it tells when a request's write began (see wire.Observer).
func monoNow() int64 { return wire.MonoNow() }

// decay returns the weight exp(-Δt/τ) that an average set at stamp keeps at
// now.
func (e *peakEWMA) decay(stamp, now int64) float64 {
	tau := e.tau.Load()
	if tau <= 0 {
		tau = int64(DefaultDecay)
	}
	return math.Exp(-float64(max(now-stamp, 0)) / float64(tau))
}

// observe adds the sample rtt taken at now.
func (e *peakEWMA) observe(rtt time.Duration, now int64) {
	sample := float64(max(rtt, 1)) // 0 means no sample
	prev := math.Float64frombits(e.bits.Load())
	if prev != 0 && sample < prev {
		w := e.decay(e.stamp.Load(), now)
		sample = prev*w + sample*(1-w)
	}
	e.bits.Store(math.Float64bits(sample))
	e.stamp.Store(now)
}

// value returns the average at now in nanoseconds, decayed since its last
// sample, or 0 when there has been no sample.
func (e *peakEWMA) value(now int64) float64 {
	v := math.Float64frombits(e.bits.Load())
	if v == 0 {
		return 0
	}
	return v * e.decay(e.stamp.Load(), now)
}

// cost is what a deployment whose time to first byte is e and that has
// inflight calls under way costs a new call: the average times the calls
// in flight and this one. A deployment never sampled costs nothing while
// idle, so that it is tried, and unsampledCost while its first calls are
// under way.
func (e *peakEWMA) cost(inflight int64, now int64) float64 {
	v := e.value(now)
	switch {
	case v != 0:
		return v * float64(inflight+1)
	case inflight <= 0:
		return 0
	}
	return unsampledCost + float64(inflight)
}
