package upstream

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/affinity"
)

// BenchmarkPick: the choice of a deployment among 4, by peak-EWMA cost
// without a session, by the ring with bounded load with one: always the
// same (the route's only, so heaviest, session), or one of 4,096.
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
	b.Run("session=many", func(b *testing.B) {
		b.ReportAllocs()
		keys := make([]uint64, 4096)
		for i := range keys {
			keys[i] = affinity.Hash(fmt.Appendf(nil, "session-%d", i))
		}
		var worker atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for i := worker.Add(1) * 997; pb.Next(); i++ {
				r.Pick(keys[i%uint64(len(keys))], true, 0)
			}
		})
	})
}
