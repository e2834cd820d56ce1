// Package latency owns the gateway's latency histograms: fixed buckets from
// tens of microseconds to minutes, observed without locks or allocations and
// written in Prometheus' own histogram kind. It does not own the metric names
// or labels (the proxy's metrics do) nor the registry that writes them.
package latency

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Histograms in Prometheus' own kind: cumulative `_bucket{le="..."}`
// series plus `_sum` and `_count`, which histogram_quantile reads and every
// Grafana panel for a proxy expects. The gateway owns this small type rather
// than using metrics.PrometheusHistogram: that one takes a mutex on every
// Update, and a call observes two histograms; here an observation is two
// atomic adds, without a lock and without allocating
// (BenchmarkObserve compares them).

// latencyBounds are the upper bounds of the latency buckets: 25 µs (a
// rejection that needs no upstream) to 10 minutes (a long stream), in 1-2.5-5
// steps. Their le labels are written as seconds.
var latencyBounds = [...]time.Duration{
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 25 * time.Second, 50 * time.Second,
	100 * time.Second, 250 * time.Second, 600 * time.Second,
}

const numBounds = len(latencyBounds)

// leLabels are the le label values of latencyBounds, then "+Inf".
var leLabels = func() (l [numBounds + 1]string) {
	for i, b := range latencyBounds {
		l[i] = strconv.FormatFloat(b.Seconds(), 'g', -1, 64)
	}
	l[numBounds] = "+Inf"
	return l
}()

// Histogram counts durations in fixed buckets of 25 µs to 10 min. The zero value is
// ready; safe for concurrent use. A scrape reads each bucket atomically but
// not all of them at one instant: a concurrent observation may show in _sum
// and not yet in a bucket, or the other way round. _count and the +Inf bucket
// are the sum of the buckets as read, so the series stay consistent with each
// other and monotonic.
type Histogram struct {
	// counts[i] holds the observations in (bound[i-1], bound[i]]; the last
	// one those above the largest bound.
	counts [numBounds + 1]atomic.Uint64
	// sum is the total observed, in nanoseconds.
	sum atomic.Uint64
}

// Observe records one duration; a negative one counts as zero.
func (h *Histogram) Observe(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(d)].Add(1)
	h.sum.Add(uint64(d))
}

// bucketOf returns the index of the first bound d does not exceed, or
// numBounds when d exceeds them all.
func bucketOf(d time.Duration) int {
	lo, hi := 0, numBounds
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if d > latencyBounds[mid] {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// AppendPrometheus appends h in the Prometheus text format: one
// `name_bucket{labels,le="..."}` line per bound, cumulative, then "+Inf",
// `name_sum` in seconds and `name_count`. labels is `key="value",...`
// without braces, possibly empty.
func (h *Histogram) AppendPrometheus(b []byte, name, labels string) []byte {
	var total uint64
	for i := range h.counts {
		total += h.counts[i].Load()
		b = append(b, name...)
		b = append(b, "_bucket{"...)
		if labels != "" {
			b = append(b, labels...)
			b = append(b, ',')
		}
		b = append(b, `le="`...)
		b = append(b, leLabels[i]...)
		b = append(b, `"} `...)
		b = strconv.AppendUint(b, total, 10)
		b = append(b, '\n')
	}
	b = appendSeries(b, name, "_sum", labels)
	b = strconv.AppendFloat(b, time.Duration(h.sum.Load()).Seconds(), 'g', -1, 64)
	b = append(b, '\n')
	b = appendSeries(b, name, "_count", labels)
	b = strconv.AppendUint(b, total, 10)
	return append(b, '\n')
}

// appendSeries appends `name+suffix{labels} `.
func appendSeries(b []byte, name, suffix, labels string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if labels != "" {
		b = append(b, '{')
		b = append(b, labels...)
		b = append(b, '}')
	}
	return append(b, ' ')
}
