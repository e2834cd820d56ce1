package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"
)

// pausePort is the first port of the pause test's own cluster: stopping a master would
// disturb the tests that share the other clusters.
const pausePort = 7151

// pauseLog records what the uploaders of TestRedisPausedMasterUploads were told.
type pauseLog struct {
	mu     sync.Mutex
	acked  map[string]pauseFile // file id → what was uploaded
	failed map[string]pauseFile
	other  []error
}

type pauseFile struct {
	owner string
	seed  int
}

func (l *pauseLog) counts() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.failed)
}

// pauseFileSize gives files of two to four chunks of pauseChunk bytes, some not whole.
func pauseFileSize(seed int) int { return 2*pauseChunk + seed*7919%(2*pauseChunk) }

const pauseChunk = 2 << 20

// pauseNoise is the random stuff of pauseData.
var pauseNoise = testData(7, 64<<10)

// pauseData returns the bytes of upload seed: every 4 KiB block starts with the seed and the
// block's number, so bytes of another upload or another place cannot pass for them.
func pauseData(seed int) []byte {
	b := make([]byte, pauseFileSize(seed))
	for off := 0; off < len(b); off += 4096 {
		blk := b[off:min(off+4096, len(b))]
		n := copy(blk, pauseNoise[off%len(pauseNoise):])
		copy(blk[n:], pauseNoise)
		copy(blk, fmt.Sprintf("%d/%d;", seed, off/4096))
	}
	return b
}

// TestRedisPausedMasterUploads stops (SIGSTOP) the master that holds some owners' files while
// uploads of distinct bytes go on with short command timeouts, on it and on the other
// masters, and resumes it (SIGCONT). An upload cut by the pause fails, and the client may
// still write its queued chunk afterwards: the chunk's buffer must not have been reused by
// another upload meanwhile. Every acknowledged file must read back byte for byte, and no
// failed upload may be there, not even one whose commit ran while its answer timed out.
func TestRedisPausedMasterUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a Redis master: not in -short")
	}
	testCluster.Addrs(t) // skips when redis cannot be had
	addrs := redistest.StartPort(t, pausePort)
	s, err := OpenRedis(RedisOptions{Addrs: addrs, KeyPrefix: "pause:", Replicas: 0,
		CommandTimeout: 500 * time.Millisecond, ChunkSize: pauseChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	victim, owners := pauseOwners(t, s, addrs)
	pid := nodePid(t, victim)
	log := &pauseLog{acked: make(map[string]pauseFile), failed: make(map[string]pauseFile)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() { uploadUntil(s, w, owners, stop, log) })
	}
	eventually(t, "uploads before the pause", func() bool { a, _ := log.counts(); return a >= 8 })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	a0, _ := log.counts()
	// Resumed once uploads to it failed and uploads elsewhere went on (taking pooled chunks),
	// and within the cluster's node timeout (5 s) so that no failover muddles the picture.
	paused := time.Now()
	for {
		a, f := log.counts()
		if f >= 8 && a >= a0+4 || time.Since(paused) > 3*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a1, _ := log.counts()
	eventually(t, "uploads after the pause", func() bool { a, _ := log.counts(); return a >= a1+8 })
	close(stop)
	wg.Wait()
	c := redistest.Client(t, addrs)
	eventually(t, "every node sees the cluster ok", func() bool { return redistest.AllOK(c) })

	if len(log.other) > 0 {
		t.Fatalf("%d uploads failed with another error than ErrUnavailable, the first: %v", len(log.other), log.other[0])
	}
	checkPausedUploads(t, s, owners, log)
	t.Logf("paused %v: %d uploads acknowledged and read back whole, %d failed",
		time.Since(paused).Round(time.Millisecond), len(log.acked), len(log.failed))
}

// pauseOwners returns the port of the master that holds the files of owner "p0", and owners
// on it and on the other masters.
func pauseOwners(t *testing.T, s *Redis, addrs []string) (int, []string) {
	t.Helper()
	c := redistest.Client(t, addrs)
	ctx := context.Background()
	nodes, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	masterOf := func(owner string) int {
		slot, err := c.Do(ctx, c.B().ClusterKeyslot().Key(s.fileKeys(owner, "x").meta).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return redistest.MasterPort(nodes, slot)
	}
	victim := masterOf("p0")
	var on, off []string
	for i := 0; len(on) < 4 || len(off) < 4; i++ {
		owner := "p" + strconv.Itoa(i)
		if masterOf(owner) == victim {
			on = append(on, owner)
		} else {
			off = append(off, owner)
		}
	}
	return victim, append(on[:4], off[:4]...)
}

func nodePid(t *testing.T, node int) int {
	t.Helper()
	b, err := os.ReadFile(redistest.PidFile(pausePort, node))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// uploadUntil uploads files of distinct bytes for owners, in turn, until stop closes.
func uploadUntil(s *Redis, w int, owners []string, stop <-chan struct{}, log *pauseLog) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		seed := w*1000000 + i
		pf := pauseFile{owner: owners[(w+i)%len(owners)], seed: seed}
		id := NewFileID(t0)
		_, err := s.PutFile(File{ID: id, Owner: pf.owner, Filename: "f", Created: t0},
			bytes.NewReader(pauseData(seed)), 1<<30)
		log.mu.Lock()
		switch {
		case err == nil:
			log.acked[id] = pf
		case errors.Is(err, ErrUnavailable):
			log.failed[id] = pf
		default:
			log.other = append(log.other, fmt.Errorf("file %s: %w", id, err))
		}
		log.mu.Unlock()
	}
}

// checkPausedUploads reads every acknowledged file back and compares it byte for byte, and
// checks that each owner's listing holds its acknowledged files and no other. An upload
// whose commit ran while its answer timed out fails and is taken back; when the node was
// stopped, the taking back waits for ReclaimExpired, run here as the janitor would.
func checkPausedUploads(t *testing.T, s *Redis, owners []string, log *pauseLog) {
	t.Helper()
	for id, pf := range log.acked {
		data, err := s.AppendFileData(nil, pf.owner, id, t0)
		if err != nil {
			t.Fatalf("acknowledged file %s of %s: %v", id, pf.owner, err)
		}
		if want := pauseData(pf.seed); !bytes.Equal(data, want) {
			t.Fatalf("acknowledged file %s of %s: %d bytes, %d uploaded, differing from byte %d",
				id, pf.owner, len(data), len(want), firstDiff(data, want))
		}
	}
	reclaimed := 0
	eventually(t, "failed uploads taken back", func() bool {
		n, err := s.ReclaimExpired(t0)
		reclaimed += n
		return err == nil
	})
	if reclaimed > 0 {
		t.Logf("%d uploads that failed on a time-out were committed all the same, then taken back", reclaimed)
	}
	for id, pf := range log.failed {
		_, err := s.AppendFileData(nil, pf.owner, id, t0)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("failed upload %s of %s is there (%v)", id, pf.owner, err)
		}
	}
	for _, owner := range owners {
		var want, got []string
		for id, pf := range log.acked {
			if pf.owner == owner {
				want = append(want, id)
			}
		}
		for after := ""; ; {
			page, more, err := s.ListFiles(owner, ListQuery{Now: t0, Limit: MaxListLimit, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range page {
				got = append(got, f.ID)
			}
			if !more {
				break
			}
			after = page[len(page)-1].ID
		}
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Fatalf("owner %s does not list acknowledged file %s", owner, id)
			}
		}
		for _, id := range got {
			if _, ok := log.acked[id]; ok {
				continue
			}
			if _, ok := log.failed[id]; ok {
				t.Fatalf("owner %s lists file %s, whose upload failed", owner, id)
			}
			t.Fatalf("owner %s lists file %s, never uploaded", owner, id)
		}
	}
}

// firstDiff returns the offset of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
