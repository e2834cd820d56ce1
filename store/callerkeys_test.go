package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// The callers' key records on both engines: conditional writes, one version step per
// change, the change log, the announcements, and records that survive a reopen.

func TestKeyStore(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Run("ConditionalWrites", func(t *testing.T) { testKeyConditionalWrites(t, e) })
			t.Run("ChangesSince", func(t *testing.T) { testKeyChangesSince(t, e) })
			t.Run("Watch", func(t *testing.T) { testKeyWatch(t, e) })
			t.Run("Invalid", func(t *testing.T) { testKeyInvalid(t, e) })
		})
	}
}

func openKeys(t *testing.T, e *engine) (storeEnv, Store, KeyStore) {
	t.Helper()
	env := e.newEnv(t, envOptions{})
	s := env.open()
	t.Cleanup(func() { s.Close() })
	return env, s, s.(KeyStore)
}

func testKeyConditionalWrites(t *testing.T, e *engine) {
	env, s, ks := openKeys(t, e)
	v1, err := ks.PutKey("k1", []byte("one"), nil)
	if err != nil || v1 != 1 {
		t.Fatalf("create: %d %v", v1, err)
	}
	if _, err := ks.PutKey("k1", []byte("again"), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v, want ErrExists", err)
	}
	if _, err := ks.PutKey("k1", []byte("two"), []byte("stale")); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a stale value: %v, want ErrConflict", err)
	}
	if _, err := ks.PutKey("k9", []byte("two"), []byte("one")); !errors.Is(err, ErrConflict) {
		t.Fatalf("update of an absent key: %v, want ErrConflict", err)
	}
	v2, err := ks.PutKey("k1", []byte("two"), []byte("one"))
	if err != nil || v2 != 2 {
		t.Fatalf("update: %d %v", v2, err)
	}
	if _, err := ks.DeleteKey("k1", []byte("one")); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete from a stale value: %v, want ErrConflict", err)
	}
	if _, err := ks.PutKey("k2", []byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := ks.DeleteKey("k2", []byte("b")); err != nil || v != 4 {
		t.Fatalf("delete: %d %v", v, err)
	}
	if _, err := ks.DeleteKey("k2", []byte("b")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	if _, err := ks.GetKey("k2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	s = env.reopen(s)
	t.Cleanup(func() { s.Close() })
	ks = s.(KeyStore)
	recs, v, err := ks.ListKeys()
	if err != nil || v != 4 || len(recs) != 1 || recs[0].ID != "k1" || string(recs[0].Data) != "two" {
		t.Fatalf("list after reopen: %+v %d %v", recs, v, err)
	}
	if d, err := ks.GetKey("k1"); err != nil || string(d) != "two" {
		t.Fatalf("get after reopen: %q %v", d, err)
	}
}

func testKeyChangesSince(t *testing.T, e *engine) {
	_, _, ks := openKeys(t, e)
	for i := range 5 {
		if _, err := ks.PutKey(fmt.Sprintf("k%d", i), []byte{'a' + byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ks.DeleteKey("k1", []byte("b")); err != nil {
		t.Fatal(err)
	}
	ch, err := ks.KeyChangesSince(6)
	if err != nil || ch.Version != 6 || ch.Full || len(ch.Changed) != 0 {
		t.Fatalf("changes at the version: %+v %v", ch, err)
	}
	ch, err = ks.KeyChangesSince(9)
	if err != nil || ch.Version != 6 || !ch.Full {
		t.Fatalf("changes from ahead of the store: %+v %v, want Full", ch, err)
	}
	ch, err = ks.KeyChangesSince(3)
	if err != nil || ch.Version != 6 {
		t.Fatalf("changes since 3: %+v %v", ch, err)
	}
	if ch.Full {
		return // the engine keeps no change log
	}
	want := []KeyRecord{{ID: "k3", Data: []byte("d")}, {ID: "k4", Data: []byte("e")}, {ID: "k1"}}
	if !slices.EqualFunc(ch.Changed, want, func(a, b KeyRecord) bool { return a.ID == b.ID && string(a.Data) == string(b.Data) }) {
		t.Fatalf("changes since 3: %+v, want %+v", ch.Changed, want)
	}
}

func testKeyWatch(t *testing.T, e *engine) {
	_, _, ks := openKeys(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[uint64]bool{}
	note := make(chan struct{}, 100)
	done := make(chan error)
	go func() {
		done <- ks.WatchKeys(ctx, func(v uint64) {
			mu.Lock()
			seen[v] = true
			mu.Unlock()
			note <- struct{}{}
		})
	}()
	// A subscription may start after a first change: change until one is seen.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		v, err := ks.PutKey(fmt.Sprintf("w%d", i), []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-note:
		case <-time.After(200 * time.Millisecond):
		}
		mu.Lock()
		ok := seen[v]
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no change announced to the watcher")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}

func testKeyInvalid(t *testing.T, e *engine) {
	_, _, ks := openKeys(t, e)
	for _, id := range []string{"", "a b", "{x}", "a/b", "\xff", string(make([]byte, MaxKeyIDLen+1))} {
		if _, err := ks.PutKey(id, []byte("x"), nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("id %q: %v, want ErrInvalid", id, err)
		}
	}
	if _, err := ks.PutKey("ok", make([]byte, MaxKeyRecordLen+1), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a record too long: %v", err)
	}
	if _, err := ks.PutKey("ok", nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an empty record: %v", err)
	}
}

// TestRedisKeyLogTrimmed: a node further behind than the change log reaches reloads all.
func TestRedisKeyLogTrimmed(t *testing.T) {
	env := newRedisEnv(t, envOptions{})
	s := env.open()
	defer s.Close()
	ks := s.(KeyStore)
	old := keysLogMax
	keysLogMax = 3
	defer func() { keysLogMax = old }()
	for i := range 6 {
		if _, err := ks.PutKey(fmt.Sprintf("k%d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if ch, err := ks.KeyChangesSince(1); err != nil || !ch.Full || ch.Version != 6 {
		t.Fatalf("since 1 with 3 logged: %+v %v, want Full", ch, err)
	}
	if ch, err := ks.KeyChangesSince(3); err != nil || ch.Full || len(ch.Changed) != 3 {
		t.Fatalf("since 3 with 3 logged: %+v %v, want the 3", ch, err)
	}
}
