package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"

	"github.com/redis/rueidis"
)

// Benchmarks of the Redis engine on the test cluster (loopback, 3 masters with a replica
// each): go test -run '^$' -bench Redis -benchmem ./store/

// benchRedis opens a store with its own key prefix and the given replicas to wait for.
func benchRedis(b *testing.B, replicas int) *Redis {
	b.Helper()
	addrs := testCluster.Addrs(b)
	s, err := OpenRedis(RedisOptions{Addrs: addrs, Replicas: replicas,
		KeyPrefix: fmt.Sprintf("bench:%d:%d:", os.Getpid(), redisPrefixSeq.Add(1))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkRedisPutResponse(b *testing.B) {
	for _, replicas := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(replicas), func(b *testing.B) {
			s := benchRedis(b, replicas)
			r := Response{ID: "resp_0123456789abcdef0123456789abcdef", Owner: "team-a", Model: "gpt-x",
				Deployment: "beta-east", Created: t0}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.PutResponse(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRedisPutResponseParallel(b *testing.B) {
	s := benchRedis(b, 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := Response{Owner: "team-a", Model: "gpt-x", Deployment: "beta-east", Created: t0}
		for i := 0; pb.Next(); i++ {
			r.ID = "resp_" + strconv.Itoa(i)
			if err := s.PutResponse(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRedisGetResponse(b *testing.B) {
	s := benchRedis(b, 1)
	r := Response{ID: "resp_0123456789abcdef0123456789abcdef", Owner: "team-a", Model: "gpt-x",
		Deployment: "beta-east", Created: t0}
	if err := s.PutResponse(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetResponse(r.ID); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisPutFile1MiB(b *testing.B) {
	s := benchRedis(b, 1)
	data := testData(1, 1<<20)
	r := bytes.NewReader(data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		f, err := s.PutFile(File{Owner: "bench", Filename: "x.png", Created: t0}, r, int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.DeleteFile("bench", f.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkRedisGetFile1MiB(b *testing.B) {
	s := benchRedis(b, 1)
	data := testData(1, 1<<20)
	f := putFile(b, s, File{Owner: "bench", Filename: "x.png", Created: t0}, data)
	buf := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = s.AppendFileData(buf[:0], "bench", f.ID, t0)
		if err != nil || len(buf) != len(data) {
			b.Fatal(err)
		}
	}
}

// TestRedisMemoryFigures measures what Redis holds per ownership record and per stored MiB of
// files, for sizing a cluster (docs/multi-node.md). It writes about 200 MiB into the test
// cluster, so it runs only when asked:
//
//	STORE_REDIS_MEMORY=1 go test -count=1 -run TestRedisMemoryFigures -v ./store/
func TestRedisMemoryFigures(t *testing.T) {
	if os.Getenv("STORE_REDIS_MEMORY") == "" {
		t.Skip("set STORE_REDIS_MEMORY=1 to measure Redis memory")
	}
	e, s := openRedisEnv(t, nil)
	c := redistest.Client(t, e.opts.Addrs)
	const records = 100000
	before := mastersMemory(t, c)
	for i := range records {
		r := Response{ID: fmt.Sprintf("resp_%032x", i), Owner: "team-a", Model: "gpt-x",
			Deployment: "beta-east", Created: time.Now()}
		if err := s.PutResponse(r); err != nil {
			t.Fatal(err)
		}
	}
	after := mastersMemory(t, c)
	t.Logf("ownership records: %d bytes each (used_memory of the masters over %d records of a 37-byte id)",
		(after-before)/records, records)
	for _, chunk := range []int{RedisChunkSize, 256 << 10, 8 << 20} {
		measureFiles(t, e, c, chunk)
	}
}

// measureFiles stores 16 files of 8 MiB with chunk size chunk and logs the memory per MiB.
func measureFiles(t *testing.T, e *redisEnv, c rueidis.Client, chunk int) {
	e.opts.ChunkSize = chunk
	s := e.open().(*Redis)
	const files, size = 16, 8 << 20
	data := testData(1, size)
	before := mastersMemory(t, c)
	var ids []string
	for range files {
		f := putFile(t, s, File{Owner: "mem", Filename: "m", Created: t0}, data)
		ids = append(ids, f.ID)
	}
	after := mastersMemory(t, c)
	perMiB := float64(after-before) / float64(files*size>>20)
	t.Logf("files in chunks of %d bytes: %.0f bytes of Redis memory per stored MiB (%.3f MiB per MiB)",
		chunk, perMiB, perMiB/(1<<20))
	for _, id := range ids {
		if err := s.DeleteFile("mem", id); err != nil {
			t.Fatal(err)
		}
	}
}

// mastersMemory returns the sum of used_memory over the masters of the cluster.
func mastersMemory(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	var sum int64
	for _, node := range c.Nodes() {
		info, err := node.Do(context.Background(), node.B().Info().Section("replication").Section("memory").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "role:master") {
			continue
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
	}
	return sum
}
