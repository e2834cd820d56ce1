package keys

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

func openPebble(t *testing.T) *store.Pebble {
	t.Helper()
	p, err := store.OpenPebble("keys", store.PebbleOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func put(t *testing.T, ks store.KeyStore, r Record, prev []byte) []byte {
	t.Helper()
	data := r.Encode()
	if _, err := ks.PutKey(r.ID, data, prev); err != nil {
		t.Fatal(err)
	}
	return data
}

func valid(s *Snapshot, key string) bool {
	_, v := s.Lookup([]byte(key), time.Now().UnixNano())
	return v == Valid
}

func TestSyncerRefresh(t *testing.T) {
	p := openPebble(t)
	swaps := 0
	s := NewSyncer([]config.Key{{ID: "seed", Key: "seed-secret"}}, SyncOptions{Store: p, OnSwap: func(*Snapshot) { swaps++ }})
	if !valid(s.Load(), "seed-secret") || s.Fresh(time.Hour) {
		t.Fatal("the first snapshot holds the seed and is not fresh before a read")
	}
	data := put(t, p, Record{ID: "a", Digest: DigestOf("a-secret")}, nil)
	if v, err := s.Refresh(); err != nil || v != 1 || !valid(s.Load(), "a-secret") || !s.Fresh(time.Hour) {
		t.Fatalf("after a create: %d %v", v, err)
	}
	put(t, p, Record{ID: "a", Digest: DigestOf("a-secret"), Blocked: true}, data)
	s.Refresh()
	if _, v := s.Load().Lookup([]byte("a-secret"), time.Now().UnixNano()); v != Blocked {
		t.Fatalf("after a block: %v", v)
	}
	before := swaps
	s.Refresh()
	if swaps != before {
		t.Fatal("a refresh without a change swapped the snapshot")
	}
	s.SetSeed(nil)
	if valid(s.Load(), "seed-secret") {
		t.Fatal("a seed key removed by a reload still works")
	}
}

func TestSyncerRunFollowsAnnouncements(t *testing.T) {
	p := openPebble(t)
	swapped := make(chan *Snapshot, 100)
	// A check period far longer than the test: only the announcement can bring the change.
	s := NewSyncer(nil, SyncOptions{Store: p, CheckEvery: time.Hour, OnSwap: func(sn *Snapshot) { swapped <- sn }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	<-swapped // the seed
	<-swapped // the first read
	put(t, p, Record{ID: "a", Digest: DigestOf("a-secret")}, nil)
	waitValid(t, swapped, "a-secret", "the change was not followed")
}

// waitValid waits for a snapshot swapped in on swapped that takes key; it fails t,
// saying what, when none has come in 30 s: a guard against a hang, not a measure.
func waitValid(t *testing.T, swapped <-chan *Snapshot, key, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case sn := <-swapped:
			if valid(sn, key) {
				return
			}
		case <-deadline:
			t.Fatal(what)
		}
	}
}

// failing is a KeyStore that fails every read while down, and tells a gap on demand.
type failing struct {
	store.KeyStore
	down bool
	full bool
}

var errDown = errors.New("down")

func (f *failing) KeyChangesSince(v uint64) (store.KeyChanges, error) {
	if f.down {
		return store.KeyChanges{}, errDown
	}
	ch, err := f.KeyStore.KeyChangesSince(v)
	ch.Full = ch.Full || f.full
	return ch, err
}

func (f *failing) ListKeys() ([]store.KeyRecord, uint64, error) {
	if f.down {
		return nil, 0, errDown
	}
	return f.KeyStore.ListKeys()
}

func TestSyncerServesLastSnapshotWhenDown(t *testing.T) {
	p := openPebble(t)
	f := &failing{KeyStore: p}
	now := time.Now()
	clock := func() time.Time { return now }
	s := NewSyncer(nil, SyncOptions{Store: f, Now: clock})
	put(t, p, Record{ID: "a", Digest: DigestOf("a-secret")}, nil)
	s.Refresh()
	f.down = true
	now = now.Add(5 * time.Second)
	if _, err := s.Refresh(); !errors.Is(err, errDown) {
		t.Fatalf("refresh while down: %v", err)
	}
	if !valid(s.Load(), "a-secret") {
		t.Fatal("the last snapshot is not served while the store is down")
	}
	if st := s.Stats(); st.Age != 5*time.Second || st.Failures != 1 || s.Fresh(time.Second) {
		t.Fatalf("stats while down: %+v", st)
	}
	f.down, f.full = false, true
	put(t, p, Record{ID: "b", Digest: DigestOf("b-secret")}, nil)
	s.Refresh()
	if st := s.Stats(); !valid(s.Load(), "b-secret") || st.Full != 2 || st.Age != 0 {
		t.Fatalf("after a gap: %+v", st)
	}
}

// silent is a KeyStore whose announcements are all lost.
type silent struct{ store.KeyStore }

func (silent) WatchKeys(ctx context.Context, fn func(uint64)) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSyncerCheckBoundsStaleness: with every announcement lost, the periodic check alone
// puts a change in force.
func TestSyncerCheckBoundsStaleness(t *testing.T) {
	p := openPebble(t)
	swapped := make(chan *Snapshot, 100)
	s := NewSyncer(nil, SyncOptions{Store: silent{p}, CheckEvery: 20 * time.Millisecond, OnSwap: func(sn *Snapshot) { swapped <- sn }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	put(t, p, Record{ID: "a", Digest: DigestOf("a-secret")}, nil)
	waitValid(t, swapped, "a-secret", "the periodic check did not bring the change")
}
