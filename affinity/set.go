package affinity

import "math/bits"

// Set is a set of node indexes as a bitmask: bit i is node i. Callers use it for the nodes a
// pick must skip (unhealthy or already tried). The zero value is the empty set. Indexes outside
// [0, MaxNodes) are never members: Has reports false and With and Without return s unchanged.
type Set uint64

// Has reports whether node i is in s.
func (s Set) Has(i int) bool {
	return s&bit(i) != 0
}

// With returns s with node i added.
func (s Set) With(i int) Set {
	return s | bit(i)
}

// Without returns s with node i removed.
func (s Set) Without(i int) Set {
	return s &^ bit(i)
}

// Len returns the number of nodes in s.
func (s Set) Len() int {
	return bits.OnesCount64(uint64(s))
}

// bit returns the Set holding only node i, or the empty Set for i outside [0, MaxNodes):
// a negative i becomes a huge uint and Go shifts it out to zero.
func bit(i int) Set {
	return 1 << uint(i)
}

// lowBits returns the Set of nodes 0..n-1 for n in [0, MaxNodes].
func lowBits(n int) Set {
	return bit(n) - 1 // bit(64) == 0, and 0-1 wraps to all 64 bits
}

// nth returns the index of the k-th (from 0) member of s, in increasing order; k < s.Len().
func (s Set) nth(k int) int {
	for ; k > 0; k-- {
		s &= s - 1 // drop the lowest member
	}
	return bits.TrailingZeros64(uint64(s))
}
