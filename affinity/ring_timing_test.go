package affinity

import (
	"fmt"
	"testing"
)

func BenchmarkHash(b *testing.B) {
	key := []byte("0b6f3c1e-8a55-4f4e-9d2b-61a7c0a4e0f1")
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	var sink uint64
	for b.Loop() {
		sink += Hash(key)
	}
	_ = sink
}

func BenchmarkPick(b *testing.B) {
	key := []byte("0b6f3c1e-8a55-4f4e-9d2b-61a7c0a4e0f1")
	for _, n := range []int{2, 4, 16, 64} {
		r := mustNew(b, testNames(n))
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(key)))
			sink := 0
			for b.Loop() {
				sink += r.Pick(key, 0)
			}
			_ = sink
		})
	}
}

func BenchmarkPickParallel(b *testing.B) {
	r := mustNew(b, testNames(4))
	keys := testKeys(1024, 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(keys[0])))
	b.RunParallel(func(pb *testing.PB) {
		i, sink := 0, 0
		for pb.Next() {
			sink += r.Pick(keys[i%len(keys)], Set(0).With(1))
			i++
		}
		_ = sink
	})
}

func BenchmarkPickLeast(b *testing.B) {
	for _, n := range []int{2, 16} {
		r := mustNew(b, testNames(n))
		loads := make([]int64, n)
		load := func(i int) int64 { return loads[i] }
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var rnd uint64
			sink := 0
			for b.Loop() {
				rnd++
				sink += r.PickLeast(rnd, 0, load)
			}
			_ = sink
		})
	}
}
