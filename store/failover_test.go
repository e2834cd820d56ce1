package store

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"
)

// failoverPort is the first port of the failover test's own cluster, apart from the shared
// one, so that killing a master disturbs no other test.
const failoverPort = 7111

// ackLog records what the writers of TestRedisFailover were told.
type ackLog struct {
	mu          sync.Mutex
	responses   []Response
	files       map[string]int // file id → seed of its data
	unavailable int
	other       []error
}

func (l *ackLog) result(err error, ack func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		ack()
	case errors.Is(err, ErrUnavailable):
		l.unavailable++
	default:
		l.other = append(l.other, err)
	}
}

func (l *ackLog) acked() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.responses), len(l.files)
}

// TestRedisFailover kills (SIGKILL) the master that holds acknowledged records while writes go
// on, and checks that after the failover every acknowledged record and file is served, that
// the writes it cut failed with ErrUnavailable and nothing else, and that the killed node
// rejoins as a replica.
func TestRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a Redis master: not in -short")
	}
	testCluster.Addrs(t) // skips when redis cannot be had
	// A node timeout of 1 s: the replica takes over about a second after the kill.
	addrs := redistest.StartPort(t, failoverPort, "REDIS_CLUSTER_NODE_TIMEOUT=1000")
	s, err := OpenRedis(RedisOptions{Addrs: addrs, KeyPrefix: "failover:", Replicas: 1,
		WaitTimeout: 500 * time.Millisecond, CommandTimeout: 2 * time.Second, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	log := &ackLog{files: make(map[string]int)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() { writeUntil(s, w, stop, log) })
	}
	waitAcked(t, log, 50)
	victim := redistest.KillMasterOf(t, failoverPort, addrs, "failover:r:resp_0_0")
	t.Logf("killed the master on port %d", victim)
	c := redistest.Client(t, addrs)
	eventually(t, "failover", func() bool { return redistest.OK(c, victim) })
	// The killed node restarts and rejoins as a replica.
	if _, err := redistest.Run("start", failoverPort, "REDIS_CLUSTER_NODE_TIMEOUT=1000"); err != nil {
		t.Fatal(err)
	}
	r0, f0 := log.acked()
	eventually(t, "writes after the failover", func() bool {
		r, f := log.acked()
		return r >= r0+50 && f >= f0+10
	})
	close(stop)
	wg.Wait()
	// Reads are checked once every node sees the cluster whole: the node that rejoined may
	// answer CLUSTERDOWN until it has the new configuration.
	eventually(t, "every node sees the cluster ok", func() bool { return redistest.AllOK(c) })

	if len(log.other) > 0 {
		t.Fatalf("%d writes failed with another error than ErrUnavailable, the first: %v", len(log.other), log.other[0])
	}
	for _, r := range log.responses {
		got, err := s.GetResponse(r.ID)
		if err != nil || got.Deployment != r.Deployment {
			t.Fatalf("acknowledged response %s lost: %+v, %v", r.ID, got, err)
		}
	}
	for id, seed := range log.files {
		data, err := s.AppendFileData(nil, "failover", id, t0)
		if err != nil || !bytes.Equal(data, testData(uint64(seed), failoverFileSize(seed))) {
			t.Fatalf("acknowledged file %s lost or damaged: %v", id, err)
		}
	}
	t.Logf("acknowledged and found after the failover: %d responses, %d files; %d writes failed with ErrUnavailable",
		len(log.responses), len(log.files), log.unavailable)
	if log.unavailable == 0 {
		t.Log("no write failed: the failover fell between writes")
	}
}

func failoverFileSize(seed int) int { return 1 + seed*7919%(3*4096) }

// writeUntil writes responses and files of writer w until stop closes, at most 20000 of each.
func writeUntil(s *Redis, w int, stop <-chan struct{}, log *ackLog) {
	for i := range 20000 {
		select {
		case <-stop:
			return
		default:
		}
		r := Response{ID: fmt.Sprintf("resp_%d_%d", w, i), Owner: "failover", Model: "m",
			Deployment: "d" + strconv.Itoa(i), Created: t0}
		err := s.PutResponse(r)
		log.result(err, func() { log.responses = append(log.responses, r) })
		if i%5 != 0 {
			continue
		}
		seed := w*100000 + i
		f, err := s.PutFile(File{Owner: "failover", Filename: "f", Created: t0},
			bytes.NewReader(testData(uint64(seed), failoverFileSize(seed))), 1<<20)
		log.result(err, func() { log.files[f.ID] = seed })
	}
}

func waitAcked(t *testing.T, log *ackLog, n int) {
	t.Helper()
	eventually(t, "first acknowledged writes", func() bool {
		r, f := log.acked()
		return r >= n && f >= n/5
	})
}
