package affinity

import "testing"

func TestSet(t *testing.T) {
	var s Set
	if s.Len() != 0 || s.Has(0) {
		t.Fatalf("zero Set is not empty: %b", s)
	}
	s = s.With(0).With(5).With(63).With(5)
	if s.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", s.Len())
	}
	for i := range MaxNodes {
		if want := i == 0 || i == 5 || i == 63; s.Has(i) != want {
			t.Fatalf("Has(%d) = %v, want %v", i, s.Has(i), want)
		}
	}
	if s = s.Without(5).Without(6); s.Has(5) || s.Len() != 2 {
		t.Fatalf("Without(5) left %b", s)
	}
	// Out-of-range indexes are never members and never change a Set.
	for _, i := range []int{-1, -64, MaxNodes, MaxNodes + 1, 1 << 40} {
		if s.Has(i) || (^Set(0)).Has(i) {
			t.Fatalf("Has(%d) = true", i)
		}
		if s.With(i) != s || s.Without(i) != s {
			t.Fatalf("With/Without(%d) changed %b", i, s)
		}
	}
}

func TestSetNth(t *testing.T) {
	s := Set(0).With(2).With(3).With(40).With(63)
	for k, want := range []int{2, 3, 40, 63} {
		if got := s.nth(k); got != want {
			t.Fatalf("nth(%d) = %d, want %d", k, got, want)
		}
	}
}

func TestLowBits(t *testing.T) {
	for n := 0; n <= MaxNodes; n++ {
		s := lowBits(n)
		if s.Len() != n {
			t.Fatalf("lowBits(%d) has %d members", n, s.Len())
		}
		if n > 0 && !s.Has(n-1) {
			t.Fatalf("lowBits(%d) lacks node %d", n, n-1)
		}
		if s.Has(n) {
			t.Fatalf("lowBits(%d) has node %d", n, n)
		}
	}
}
