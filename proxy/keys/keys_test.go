package keys

import (
	"fmt"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

func stored(t testing.TB, r Record) *Entry {
	t.Helper()
	rec, err := Decode(r.ID, r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return EntryOf(rec)
}

func TestLookup(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	seed := []config.Key{{ID: "seed", Key: "seed-secret"}, {ID: "hashed", SHA256: DigestOf("hashed-secret")}}
	entries := map[string]*Entry{
		"live":    stored(t, Record{ID: "live", Digest: DigestOf("live-secret"), Previous: []Previous{{Digest: DigestOf("old-secret"), Until: future}, {Digest: DigestOf("older-secret"), Until: past}}}),
		"blocked": stored(t, Record{ID: "blocked", Digest: DigestOf("blocked-secret"), Blocked: true}),
		"expired": stored(t, Record{ID: "expired", Digest: DigestOf("expired-secret"), ExpiresAt: &past}),
		"later":   stored(t, Record{ID: "later", Digest: DigestOf("later-secret"), ExpiresAt: &future}),
		// A stored key may not take a seed key's id or secret.
		"seed":  stored(t, Record{ID: "seed", Digest: DigestOf("other")}),
		"thief": stored(t, Record{ID: "thief", Digest: DigestOf("seed-secret")}),
	}
	s := Build(seed, entries, 7, now)
	f := func(key, id string, want Verdict) {
		t.Helper()
		e, v := s.Lookup([]byte(key), now.UnixNano())
		if v != want || (want == Valid && e.ID != id) {
			t.Fatalf("%s: %v %v, want %s %v", key, e, v, id, want)
		}
	}
	f("seed-secret", "seed", Valid)
	f("hashed-secret", "hashed", Valid)
	f("live-secret", "live", Valid)
	f("old-secret", "live", Valid)
	f("older-secret", "", Unknown)
	f("blocked-secret", "", Blocked)
	f("expired-secret", "", Expired)
	f("later-secret", "later", Valid)
	f("other", "", Unknown)
	f("", "", Unknown)
	if e, _ := s.Get("seed"); e.Source != SourceConfig {
		t.Fatalf("seed id taken by a stored key: %+v", e)
	}
	if _, ok := s.Get("thief"); ok {
		t.Fatal("a stored key with a seed key's secret is in force")
	}
	if s.Len() != 6 {
		t.Fatalf("%d keys, want 6", s.Len())
	}
	page, more := s.After("blocked", 2, nil)
	if len(page) != 2 || page[0].ID != "expired" || page[1].ID != "hashed" || !more {
		t.Fatalf("page after blocked: %v %v", page, more)
	}
}

func TestModels(t *testing.T) {
	f := func(patterns []string, model string, want bool) {
		t.Helper()
		if got := NewModels(patterns).AllowsString(model); got != want {
			t.Fatalf("%q allows %q: %v, want %v", patterns, model, got, want)
		}
	}
	f(nil, "anything", true)
	f([]string{}, "anything", false)
	f([]string{"gpt-4o"}, "gpt-4o", true)
	f([]string{"gpt-4o"}, "gpt-4o-mini", false)
	f([]string{"gpt-*"}, "gpt-4o-mini", true)
	f([]string{"*-mini"}, "gpt-4o-mini", true)
	f([]string{"*-mini"}, "gpt-4o", false)
	f([]string{"a*b*c"}, "a-x-b-y-c", true)
	f([]string{"a*b*c"}, "a-x-c-b", false)
	f([]string{"ab*ba"}, "aba", false)
	f([]string{"org/*"}, "org/model/v2", true)
	f([]string{"*"}, "", true)
	if !MatchesAny("chat-*", []string{"img", "chat-model"}) || MatchesAny("x*", []string{"img"}) {
		t.Fatal("MatchesAny")
	}
}

// snapshotOf builds a snapshot of n stored keys "k<i>" with secrets "secret-<i>".
func snapshotOf(tb testing.TB, n int) *Snapshot {
	entries := make(map[string]*Entry, n)
	for i := range n {
		id := fmt.Sprintf("k%d", i)
		entries[id] = EntryOf(&Record{ID: id, Digest: DigestOf(fmt.Sprintf("secret-%d", i)), Models: []string{"chat-*"}})
	}
	return Build(nil, entries, 1, time.Now())
}

// BenchmarkLookup shows that a lookup costs the same with 10 keys as with 100,000, with
// no allocation.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 100_000} {
		s := snapshotOf(b, n)
		key := []byte(fmt.Sprintf("secret-%d", n/2))
		now := time.Now().UnixNano()
		model := []byte("chat-model")
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e, v := s.Lookup(key, now)
					if v != Valid || !e.Models.Allows(model) {
						b.Fatal("refused")
					}
				}
			})
		})
	}
}
