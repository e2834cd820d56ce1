//go:build !race

package keys

import (
	"testing"
	"time"
)

func TestLookupAllocs(t *testing.T) {
	s := snapshotOf(t, 1000)
	key, model, now := []byte("secret-500"), []byte("chat-4"), time.Now().UnixNano()
	n := testing.AllocsPerRun(1000, func() {
		if e, v := s.Lookup(key, now); v != Valid || !e.Models.Allows(model) {
			t.Fatal("refused")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per lookup, want 0", n)
	}
}
