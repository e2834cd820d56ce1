package upstream

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/affinity"
)

// BenchmarkPick: the choice of a deployment among 4, by peak-EWMA cost
// without a session, by the ring with bounded load with one.
func BenchmarkPick(b *testing.B) {
	r := newTestRoute(b, 4, 1.25, nil)
	now := monoNow()
	for i, d := range r.deps {
		d.ttfb.observe(time.Duration(i+1)*time.Millisecond, now)
		d.inflight.Store(int64(3 * i))
	}
	b.Run("session=no", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Pick(0, false, 0)
			}
		})
	})
	b.Run("session=yes", func(b *testing.B) {
		b.ReportAllocs()
		key := affinity.Hash([]byte("session"))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Pick(key, true, 0)
			}
		})
	})
}
