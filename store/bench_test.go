package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func BenchmarkPutFile8MiB(b *testing.B) {
	p := newDiskEnv(b, PebbleOptions{}).open()
	data := testData(1, 8<<20)
	r := bytes.NewReader(data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		f, err := p.PutFile(File{Owner: "bench", Filename: "x.png", Created: t0}, r, int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := p.DeleteFile("bench", f.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkAppendFileData8MiB(b *testing.B) {
	p := newDiskEnv(b, PebbleOptions{}).open()
	data := testData(1, 8<<20)
	f := putFile(b, p, File{Owner: "bench", Filename: "x.png", Created: t0}, data)
	buf := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = p.AppendFileData(buf[:0], "bench", f.ID, t0)
		if err != nil || len(buf) != len(data) {
			b.Fatal(err)
		}
	}
}

func BenchmarkListFiles100(b *testing.B) {
	p := newDiskEnv(b, PebbleOptions{}).open()
	var ids []string
	for i := range 1000 {
		f := File{Owner: "bench", Filename: fmt.Sprintf("f%d.png", i), MimeType: "image/png",
			Purpose: "vision", Created: t0, Expires: t0.Add(time.Hour)}
		ids = append(ids, putFile(b, p, f, []byte("x")).ID)
	}
	for _, bc := range []struct {
		name string
		q    ListQuery
	}{
		{"desc", ListQuery{Now: t0, Limit: 100, Desc: true}},
		{"asc-after", ListQuery{Now: t0, Limit: 100, After: ids[500]}},
		{"ids", ListQuery{Now: t0, Desc: true, IDs: ids[200:300]}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				files, _, err := p.ListFiles("bench", bc.q)
				if err != nil || len(files) != 100 {
					b.Fatalf("%d files, %v", len(files), err)
				}
			}
		})
	}
}

// BenchmarkPutResponse shows the cost of one acknowledged record at each durability level.
func BenchmarkPutResponse(b *testing.B) {
	for _, d := range []Durability{DurabilityProcess, DurabilityMachine} {
		b.Run(d.String(), func(b *testing.B) {
			p := newDiskEnv(b, PebbleOptions{Durability: d}).open()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				r := Response{ID: fmt.Sprintf("resp_%016d", i), Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
				if err := p.PutResponse(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutResponseParallel shows Pebble's group commit: at DurabilityMachine concurrent
// synced writes share fsyncs.
func BenchmarkPutResponseParallel(b *testing.B) {
	for _, d := range []Durability{DurabilityProcess, DurabilityMachine} {
		b.Run(d.String(), func(b *testing.B) {
			p := newDiskEnv(b, PebbleOptions{Durability: d}).open()
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := Response{ID: fmt.Sprintf("resp_%016d", n.Add(1)), Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
					if err := p.PutResponse(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkGetResponse reads records back: "recent" just after they were put,
// from the records this process put last (recentResponses), "stored" after
// a reopen, from Pebble.
func BenchmarkGetResponse(b *testing.B) {
	for _, reopen := range []bool{false, true} {
		name := "recent"
		if reopen {
			name = "stored"
		}
		b.Run(name, func(b *testing.B) {
			e := newDiskEnv(b, PebbleOptions{})
			p := e.open()
			const n = 4096
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("resp_%016d", i)
				r := Response{ID: ids[i], Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
				if err := p.PutResponse(r); err != nil {
					b.Fatal(err)
				}
			}
			if reopen {
				p = e.reopen(p)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := p.GetResponse(ids[i%n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutResponseIDOrder shows what the order of response ids costs a record: the
// memtable is a skiplist, and an id that sorts after the ones before it (OpenAI's begin
// with the creation second in hex) inserts along a path that stays in the cache, where a
// random one misses it at most levels. 12,000 records share each second, as at the
// harness's create rate.
func BenchmarkPutResponseIDOrder(b *testing.B) {
	for _, order := range []string{"random", "time-prefixed"} {
		b.Run(order, func(b *testing.B) {
			p := newDiskEnv(b, PebbleOptions{}).open()
			rng := rand.New(rand.NewPCG(1, 2))
			ids := make([]string, b.N)
			for i := range ids {
				switch order {
				case "random":
					ids[i] = fmt.Sprintf("resp_%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64())
				default:
					ids[i] = fmt.Sprintf("resp_%08x%08x%016x%016x", 0x67ccd2be+i/12000, rng.Uint32(), rng.Uint64(), rng.Uint64())
				}
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := Response{ID: ids[n.Add(1)-1], Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
					if err := p.PutResponse(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkPutResponseServing records responses the way a serving gateway does: 64 callers
// that each wait 2 ms between records, so that the process's Ps go idle between them and
// the scheduler's wake-ups count. It reports the process's CPU time per record
// (getrusage, user and system), the figure docs/performance.md compares; ns/op is wall time
// and mostly the callers' waits.
func BenchmarkPutResponseServing(b *testing.B) {
	p := newDiskEnv(b, PebbleOptions{}).open()
	const callers = 64
	per := b.N/callers + 1
	var n atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				time.Sleep(2 * time.Millisecond)
				r := Response{ID: fmt.Sprintf("resp_%016d", n.Add(1)), Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
				if err := p.PutResponse(r); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(n.Load()), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used, user and system, in ns
// (as proxy/rawio's benchmark reads it).
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
