package latency

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

func TestBucketOf(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := leLabels[bucketOf(d)]; got != want {
			t.Errorf("bucketOf(%v): le=%s; want le=%s", d, got, want)
		}
	}
	f(0, "2.5e-05")
	f(25*time.Microsecond, "2.5e-05") // le: a bound holds what equals it
	f(25*time.Microsecond+1, "5e-05")
	f(3*time.Millisecond, "0.005")
	f(time.Second, "1")
	f(time.Second+1, "2.5")
	f(10*time.Minute, "600")
	f(10*time.Minute+1, "+Inf")
	f(1<<62, "+Inf")
}

func TestHistogramPrometheusText(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{-time.Second, 30 * time.Microsecond, 2 * time.Millisecond, 2 * time.Millisecond, 700 * time.Second} {
		h.Observe(d)
	}
	got := string(h.AppendPrometheus(nil, "x_seconds", `deployment="d1"`))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != numBounds+3 {
		t.Fatalf("%d lines; want %d:\n%s", len(lines), numBounds+3, got)
	}
	for _, want := range []string{
		`x_seconds_bucket{deployment="d1",le="2.5e-05"} 1`, // the negative one, as zero
		`x_seconds_bucket{deployment="d1",le="5e-05"} 2`,
		`x_seconds_bucket{deployment="d1",le="0.001"} 2`,
		`x_seconds_bucket{deployment="d1",le="0.0025"} 4`,
		`x_seconds_bucket{deployment="d1",le="600"} 4`,
		`x_seconds_bucket{deployment="d1",le="+Inf"} 5`,
		`x_seconds_sum{deployment="d1"} 700.00403`,
		`x_seconds_count{deployment="d1"} 5`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if got := string(new(Histogram).AppendPrometheus(nil, "y", "")); !strings.HasPrefix(got, `y_bucket{le="2.5e-05"} 0`+"\n") ||
		!strings.HasSuffix(got, "y_sum 0\ny_count 0\n") {
		t.Errorf("without labels:\n%s", got)
	}
}

// Concurrent observations are all counted: nothing is lost without a lock.
func TestHistogramConcurrent(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Observe(time.Duration(g*1000+i) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	if n != 8000 || h.sum.Load() != uint64(7999*8000/2*time.Millisecond) {
		t.Fatalf("count %d, sum %d", n, h.sum.Load())
	}
}

func TestObserveZeroAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Observe(3 * time.Millisecond) }); n != 0 {
		t.Fatalf("%v allocations per observe", n)
	}
}

// BenchmarkObserve compares an observation of the gateway's
// lock-free histogram with metrics.PrometheusHistogram.Update (a mutex per
// update) and the VictoriaMetrics histogram the gateway used before, all from
// parallel goroutines on one histogram, as the calls to one deployment do.
//
//	go test ./proxy/latency/ -run '^$' -bench Observe -cpu 1,2
func BenchmarkObserve(b *testing.B) {
	d := 3 * time.Millisecond
	b.Run("gateway", func(b *testing.B) {
		var h Histogram
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Observe(d)
			}
		})
	})
	b.Run("prometheus-histogram", func(b *testing.B) {
		h := metrics.NewSet().NewPrometheusHistogramExt("x_seconds", latencyBoundsSeconds())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Update(d.Seconds())
			}
		})
	})
	b.Run("vm-histogram", func(b *testing.B) {
		h := metrics.NewSet().NewHistogram("x_seconds")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Update(d.Seconds())
			}
		})
	})
}

func latencyBoundsSeconds() []float64 {
	s := make([]float64, numBounds)
	for i, b := range latencyBounds {
		s[i] = b.Seconds()
	}
	return s
}
