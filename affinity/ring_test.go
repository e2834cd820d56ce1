package affinity

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// testNames returns n distinct deployment names.
func testNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("beta-deploy-%02d", i)
	}
	return names
}

// testKeys returns n session keys shaped like UUIDs in hex, from a fixed seed.
func testKeys(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	keys := make([][]byte, n)
	var raw [16]byte
	for i := range keys {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		keys[i] = hex.AppendEncode(nil, raw[:])
	}
	return keys
}

func mustNew(t testing.TB, names []string) *Ring {
	t.Helper()
	r, err := New(names)
	if err != nil {
		t.Fatalf("New(%q): %s", names, err)
	}
	return r
}

// pickNames maps every key to the name of its node (or "" for -1).
func pickNames(r *Ring, names []string, keys [][]byte, excluded Set) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		if n := r.Pick(k, excluded); n >= 0 {
			out[i] = names[n]
		}
	}
	return out
}

func TestNew(t *testing.T) {
	f := func(names []string, want error) {
		t.Helper()
		r, err := New(names)
		if !errors.Is(err, want) {
			t.Fatalf("New(%d names): error %v, want %v", len(names), err, want)
		}
		if want != nil {
			if r != nil {
				t.Fatalf("New(%d names): non-nil ring with error", len(names))
			}
			return
		}
		if r.Len() != len(names) {
			t.Fatalf("Len() = %d, want %d", r.Len(), len(names))
		}
	}
	f(nil, nil)
	f([]string{"beta-east"}, nil)
	f(testNames(MaxNodes), nil)
	f(testNames(MaxNodes+1), ErrTooManyNodes)
	f([]string{"beta-east", ""}, ErrEmptyName)
	f([]string{"beta-east", "beta-west", "beta-east"}, ErrDuplicateName)
}

func TestNewDoesNotKeepNames(t *testing.T) {
	names := testNames(4)
	r := mustNew(t, names)
	keys := testKeys(100, 1)
	before := pickNames(r, testNames(4), keys, 0)
	names[0], names[3] = "changed-a", "changed-b"
	if after := pickNames(r, testNames(4), keys, 0); !slices.Equal(before, after) {
		t.Fatal("changing the names slice after New changed the picks")
	}
}

func TestEmptyRing(t *testing.T) {
	f := func(name string, r *Ring) {
		t.Helper()
		if n := r.Len(); n != 0 {
			t.Fatalf("%s: Len() = %d, want 0", name, n)
		}
		if n := r.Pick([]byte("session"), 0); n != -1 {
			t.Fatalf("%s: Pick = %d, want -1", name, n)
		}
		if n := r.PickLeast(7, 0, func(int) int64 { return 0 }); n != -1 {
			t.Fatalf("%s: PickLeast = %d, want -1", name, n)
		}
	}
	var zero Ring
	f("zero value", &zero)
	f("nil", nil)
	f("New(nil)", mustNew(t, nil))
}

func TestHashIsXXHash64(t *testing.T) {
	// Reference vectors of XXH64 with seed 0, as published with the algorithm.
	f := func(key string, want uint64) {
		t.Helper()
		if got := Hash([]byte(key)); got != want {
			t.Fatalf("Hash(%q) = %#x, want %#x", key, got, want)
		}
	}
	f("", 0xef46db3751d8e999)
	f("a", 0xd24ec4f1a98c6e5b)
	f("asdf", 0x415872f599cea71e)
}

func TestPickSameKeySameNode(t *testing.T) {
	names := testNames(5)
	r1, r2 := mustNew(t, names), mustNew(t, slices.Clone(names))
	for _, key := range testKeys(50, 2) {
		first := r1.Pick(key, 0)
		if first < 0 || first >= len(names) {
			t.Fatalf("Pick(%s) = %d, out of range", key, first)
		}
		for range 200 {
			if n := r1.Pick(key, 0); n != first {
				t.Fatalf("Pick(%s) = %d, then %d", key, first, n)
			}
		}
		if n := r2.Pick(key, 0); n != first {
			t.Fatalf("Pick(%s) = %d on one ring, %d on another built from the same names", key, first, n)
		}
		if n := r1.PickHash(Hash(key), 0); n != first {
			t.Fatalf("PickHash(Hash(%s)) = %d, Pick = %d", key, n, first)
		}
	}
}

// TestPickStableAcrossVersions pins the mapping of a few keys. Every gateway node must pick alike,
// including nodes running different builds during a rolling upgrade: a change to Hash or to the
// scoring reshuffles every session, and must fail here first.
func TestPickStableAcrossVersions(t *testing.T) {
	names := []string{"beta-east", "beta-west", "beta-north", "beta-south"}
	r := mustNew(t, names)
	f := func(key, want string) {
		t.Helper()
		if got := names[r.Pick([]byte(key), 0)]; got != want {
			t.Fatalf("Pick(%q) = %s, want %s", key, got, want)
		}
	}
	f("", "beta-east")
	f("session-1", "beta-west")
	f("session-2", "beta-north")
	f("session-3", "beta-south")
	f("0b6f3c1e-8a55-4f4e-9d2b-61a7c0a4e0f1", "beta-east")
	f("user-42/conversation-7", "beta-south")
}

// share returns the fraction of keys that each node of r gets.
func share(r *Ring, keys [][]byte) []float64 {
	counts := make([]int, r.Len())
	for _, k := range keys {
		counts[r.Pick(k, 0)]++
	}
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = float64(c) / float64(len(keys))
	}
	return out
}

func TestPickEvenTwoNodes(t *testing.T) {
	r := mustNew(t, []string{"beta-east", "beta-west"})
	for i, s := range share(r, testKeys(1000, 3)) {
		if s < 0.45 || s > 0.55 {
			t.Fatalf("node %d gets %.1f%% of 1000 keys, want 45-55%%", i, s*100)
		}
	}
}

func TestPickEvenFourNodes(t *testing.T) {
	r := mustNew(t, testNames(4))
	for i, s := range share(r, testKeys(100_000, 4)) {
		if s < 0.25*0.95 || s > 0.25*1.05 {
			t.Fatalf("node %d gets %.2f%% of 100000 keys, want 25%% ± 5%% of it", i, s*100)
		}
	}
}

func TestPickAddNodeMovesOnlyToIt(t *testing.T) {
	two := []string{"beta-east", "beta-west"}
	three := append(slices.Clone(two), "beta-north")
	keys := testKeys(10_000, 5)
	before := pickNames(mustNew(t, two), two, keys, 0)
	after := pickNames(mustNew(t, three), three, keys, 0)
	moved := 0
	for i := range keys {
		if before[i] == after[i] {
			continue
		}
		moved++
		if after[i] != "beta-north" {
			t.Fatalf("key %s moved from %s to %s, not to the new node", keys[i], before[i], after[i])
		}
	}
	if frac := float64(moved) / float64(len(keys)); frac < 0.28 || frac > 0.39 {
		t.Fatalf("adding a third node moved %.1f%% of keys, want 28-39%%", frac*100)
	}
}

func TestPickRemoveNodeMovesOnlyItsKeys(t *testing.T) {
	all := testNames(4)
	keys := testKeys(10_000, 6)
	full := mustNew(t, all)
	before := pickNames(full, all, keys, 0)
	for gone := range all {
		rest := slices.Delete(slices.Clone(all), gone, gone+1)
		after := pickNames(mustNew(t, rest), rest, keys, 0)
		moved := 0
		for i := range keys {
			if before[i] == all[gone] {
				moved++
				if after[i] == all[gone] {
					t.Fatalf("key %s still maps to removed node %s", keys[i], all[gone])
				}
			} else if after[i] != before[i] {
				t.Fatalf("removing %s moved key %s from %s to %s", all[gone], keys[i], before[i], after[i])
			}
		}
		if moved == 0 {
			t.Fatalf("removed node %s had no keys", all[gone])
		}
		// A removed node and an excluded node are the same thing to the other nodes.
		if excl := pickNames(full, all, keys, Set(0).With(gone)); !slices.Equal(excl, after) {
			t.Fatalf("excluding %s and removing it map keys differently", all[gone])
		}
	}
}

func TestPickExcludeAndReturn(t *testing.T) {
	names := testNames(4)
	r := mustNew(t, names)
	keys := testKeys(10_000, 7)
	f := func(excluded Set) {
		t.Helper()
		before := make([]int, len(keys))
		for i, k := range keys {
			before[i] = r.Pick(k, 0)
		}
		moved := 0
		for i, k := range keys {
			n := r.Pick(k, excluded)
			if excluded.Has(n) {
				t.Fatalf("Pick(%s, %b) = excluded node %d", k, excluded, n)
			}
			if excluded.Has(before[i]) {
				moved++
			} else if n != before[i] {
				t.Fatalf("excluding %b moved key %s from %d to %d", excluded, k, before[i], n)
			}
		}
		if moved == 0 {
			t.Fatalf("excluded nodes %b had no keys", excluded)
		}
		for i, k := range keys {
			if n := r.Pick(k, 0); n != before[i] {
				t.Fatalf("after the exclusion ended key %s is on %d, was %d", k, n, before[i])
			}
		}
	}
	for i := range names {
		f(Set(0).With(i))
	}
	f(Set(0).With(0).With(2))
	f(Set(0).With(1).With(2).With(3))
}

func TestPickAllExcluded(t *testing.T) {
	r := mustNew(t, testNames(3))
	f := func(excluded Set, want int) {
		t.Helper()
		if n := r.Pick([]byte("session"), excluded); n != want {
			t.Fatalf("Pick(excluded=%b) = %d, want %d", excluded, n, want)
		}
	}
	f(Set(0).With(0).With(1).With(2), -1)
	f(^Set(0), -1)
	f((^Set(0)).Without(1), 1)
	f(Set(0).With(0).With(2).With(3).With(63), 1) // bits past Len are ignored
}

func TestPickIgnoresNameOrder(t *testing.T) {
	names := testNames(7)
	keys := testKeys(5000, 8)
	want := pickNames(mustNew(t, names), names, keys, 0)
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	shuffled := slices.Clone(names)
	rand.New(rand.NewPCG(9, 9)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	for _, order := range [][]string{reversed, shuffled} {
		if got := pickNames(mustNew(t, order), order, keys, 0); !slices.Equal(got, want) {
			t.Fatalf("names in order %q map keys to other names than in order %q", order, names)
		}
	}
}

func TestPickLeastPrefersLessLoaded(t *testing.T) {
	loads := []int64{5, 1, 9, 3} // node 2 is the most loaded, node 1 the least
	r := mustNew(t, testNames(len(loads)))
	load := func(i int) int64 { return loads[i] }
	counts := make([]int, len(loads))
	const calls = 10_000
	for rnd := range uint64(calls) { // a plain counter: PickLeast mixes it
		counts[r.PickLeast(rnd, 0, load)]++
	}
	if counts[2] != 0 {
		t.Fatalf("the most loaded node was picked %d times", counts[2])
	}
	// The least loaded wins whenever it is one of the two choices: 2/n of the calls.
	if frac := float64(counts[1]) / calls; frac < 0.45 || frac > 0.55 {
		t.Fatalf("the least loaded node was picked in %.1f%% of calls, want about 50%%", frac*100)
	}
	if counts[0] == 0 || counts[3] == 0 {
		t.Fatalf("nodes that are sometimes the lesser of two were never picked: %v", counts)
	}
}

func TestPickLeastTwoChoicesAreDistinct(t *testing.T) {
	r := mustNew(t, testNames(6))
	f := func(excluded Set) {
		t.Helper()
		var asked []int
		load := func(i int) int64 { asked = append(asked, i); return int64(i) }
		for rnd := range uint64(1000) {
			asked = asked[:0]
			n := r.PickLeast(rnd, excluded, load)
			if len(asked) != 2 || asked[0] == asked[1] || excluded.Has(asked[0]) || excluded.Has(asked[1]) {
				t.Fatalf("PickLeast(%d, %06b) asked the load of %v, want two distinct free nodes", rnd, excluded, asked)
			}
			if n != min(asked[0], asked[1]) { // load(i) == i
				t.Fatalf("PickLeast(%d, %06b) = %d, not the less loaded of %v", rnd, excluded, n, asked)
			}
		}
	}
	f(0)
	f(Set(0).With(0).With(5))
	f((^Set(0)).Without(1).Without(4)) // two free nodes: both are always asked
}

func TestPickLeastEqualLoadsSpread(t *testing.T) {
	r := mustNew(t, testNames(6))
	excluded := (^Set(0)).Without(1).Without(4)
	counts := map[int]int{}
	for rnd := range uint64(1000) {
		counts[r.PickLeast(rnd, excluded, func(int) int64 { return 0 })]++
	}
	if len(counts) != 2 || counts[1] < 400 || counts[4] < 400 {
		t.Fatalf("equal loads over free nodes 1 and 4 gave %v", counts)
	}
}

func TestPickLeastExcluded(t *testing.T) {
	const n = 5
	r := mustNew(t, testNames(n))
	calls := 0
	load := func(i int) int64 { calls++; return int64((i * 7) % n) }
	for excluded := range Set(1 << n) {
		free := lowBits(n) &^ excluded
		for rnd := range uint64(200) {
			calls = 0
			got := r.PickLeast(rnd*0x9e3779b97f4a7c15, excluded, load)
			switch {
			case free == 0 && got != -1:
				t.Fatalf("all excluded: PickLeast = %d, want -1", got)
			case free != 0 && (got < 0 || got >= n || excluded.Has(got)):
				t.Fatalf("PickLeast(excluded=%05b) = %d", excluded, got)
			case free.Len() == 1 && got != free.nth(0):
				t.Fatalf("PickLeast(excluded=%05b) = %d, want the only free node %d", excluded, got, free.nth(0))
			case calls > 2:
				t.Fatalf("load called %d times", calls)
			}
		}
	}
}

func TestPickLeastOneNode(t *testing.T) {
	r := mustNew(t, []string{"beta-east"})
	for rnd := range uint64(100) {
		if n := r.PickLeast(rnd, 0, func(int) int64 { return 1 << 40 }); n != 0 {
			t.Fatalf("PickLeast on one node = %d, want 0", n)
		}
		if n := r.PickLeast(rnd, Set(0).With(0), func(int) int64 { return 0 }); n != -1 {
			t.Fatalf("PickLeast on one excluded node = %d, want -1", n)
		}
	}
}

// fuzzRings holds a ring of every size from 0 to MaxNodes.
var fuzzRings = func() []*Ring {
	rings := make([]*Ring, MaxNodes+1)
	for n := range rings {
		r, err := New(testNames(n))
		if err != nil {
			panic(err)
		}
		rings[n] = r
	}
	return rings
}()

func FuzzPick(f *testing.F) {
	f.Add([]byte("session-1"), uint64(0), uint8(2), uint8(0))
	f.Add([]byte(""), uint64(0b101), uint8(3), uint8(1))
	f.Add([]byte("x"), ^uint64(0), uint8(64), uint8(63))
	f.Add([]byte("0b6f3c1e-8a55-4f4e"), uint64(1)<<63, uint8(64), uint8(7))
	f.Fuzz(func(t *testing.T, key []byte, excl uint64, size, other uint8) {
		r := fuzzRings[int(size)%len(fuzzRings)]
		excluded := Set(excl)
		free := r.free(excluded)
		n := r.Pick(key, excluded)
		if n == -1 {
			if free != 0 {
				t.Fatalf("Pick = -1 with free nodes %b", free)
			}
			return
		}
		if n < 0 || n >= r.Len() || excluded.Has(n) {
			t.Fatalf("Pick = %d on %d nodes, excluded %b", n, r.Len(), excluded)
		}
		// Excluding another free node never moves the key; excluding its node always does.
		o := int(other) % r.Len()
		if o != n && r.Pick(key, excluded.With(o)) != n {
			t.Fatalf("excluding node %d moved the key off node %d", o, n)
		}
		if m := r.Pick(key, excluded.With(n)); m == n || (m == -1) != (free.Len() == 1) {
			t.Fatalf("excluding node %d gave %d with %d free nodes", n, m, free.Len())
		}
	})
}

func FuzzPickLeast(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint8(2))
	f.Add(uint64(12345), uint64(0b1011), uint8(5))
	f.Add(^uint64(0), ^uint64(0)>>1, uint8(64))
	f.Fuzz(func(t *testing.T, rnd, excl uint64, size uint8) {
		r := fuzzRings[int(size)%len(fuzzRings)]
		excluded := Set(excl)
		free := r.free(excluded)
		loadOf := func(i int) int64 { return int64(mix(uint64(i)) % 8) }
		var seen []int
		load := func(i int) int64 {
			seen = append(seen, i)
			return loadOf(i)
		}
		n := r.PickLeast(rnd, excluded, load)
		switch {
		case n == -1:
			if free != 0 {
				t.Fatalf("PickLeast = -1 with free nodes %b", free)
			}
		case n < 0 || n >= r.Len() || excluded.Has(n):
			t.Fatalf("PickLeast = %d on %d nodes, excluded %b", n, r.Len(), excluded)
		case free.Len() >= 2:
			if len(seen) != 2 || seen[0] == seen[1] || !free.Has(seen[0]) || !free.Has(seen[1]) {
				t.Fatalf("load asked for nodes %v, want two distinct free nodes of %b", seen, free)
			}
			if !slices.Contains(seen, n) || loadOf(n) > min(loadOf(seen[0]), loadOf(seen[1])) {
				t.Fatalf("PickLeast = %d, not the less loaded of %v", n, seen)
			}
		}
	})
}

// TestPickTwo: two distinct nodes outside the excluded set, each drawn about
// evenly; one node alone gives it and -1, none gives -1, -1.
func TestPickTwo(t *testing.T) {
	r := mustNew(t, testNames(5))
	excluded := Set(0).With(2)
	var count [5]int
	for i := range uint64(20000) {
		a, b := r.PickTwo(i, excluded)
		if a == b || excluded.Has(a) || excluded.Has(b) || a < 0 || b < 0 {
			t.Fatalf("rnd %d: %d and %d", i, a, b)
		}
		count[a]++
		count[b]++
	}
	for i, n := range count {
		if i != 2 && (n < 9000 || n > 11000) {
			t.Fatalf("node %d drawn %d times of 40000 over 4 nodes: %v", i, n, count)
		}
	}
	if a, b := r.PickTwo(1, Set(0b11011)); a != 2 || b != -1 {
		t.Fatalf("one node left: %d, %d", a, b)
	}
	if a, b := r.PickTwo(1, Set(0b11111)); a != -1 || b != -1 {
		t.Fatalf("none left: %d, %d", a, b)
	}
}
