package store

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestInternReturnsTheBytes(t *testing.T) {
	var tab internTable
	// More values than slots: every slot is taken by several in turn, and
	// each lookup must still return its own bytes.
	for round := range 3 {
		for i := range 4 * internSlots {
			want := fmt.Sprintf("deployment-%d", i)
			if got := tab.get([]byte(want)); got != want {
				t.Fatalf("round %d: got %q for %q", round, got, want)
			}
		}
	}
	long := strings.Repeat("m", internMax+1)
	if got := tab.get([]byte(long)); got != long {
		t.Fatalf("got %q", got)
	}
	for i := range tab.slots {
		if p := tab.slots[i].Load(); p != nil && len(*p) > internMax {
			t.Fatalf("slot %d keeps a value of %d bytes", i, len(*p))
		}
	}
	if tab.get(nil) != "" || tab.get([]byte{}) != "" {
		t.Fatal("empty value")
	}
}

// A value seen again is the string of the first lookup, not a copy, and the
// string does not alias the bytes it was made from.
func TestInternKeepsOneCopy(t *testing.T) {
	var tab internTable
	b := []byte("team-a")
	first := tab.get(b)
	b[0] = 'T'
	if first != "team-a" {
		t.Fatalf("the interned string changed with its source: %q", first)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = tab.get([]byte("team-a")) }); allocs != 0 {
		t.Fatalf("%v allocations for a value held", allocs)
	}
}

// Lookups from many goroutines, several values per slot (run under -race).
func TestInternConcurrent(t *testing.T) {
	var tab internTable
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				want := fmt.Sprintf("model-%d", (i*7+g)%(2*internSlots))
				if got := tab.get([]byte(want)); got != want {
					t.Errorf("got %q for %q", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
