// Package affinity owns the consistent choice of an upstream deployment for a session key.
//
// A Ring is a rendezvous (highest random weight) hash over a fixed, ordered list of node names.
// The choice depends only on the names and the key: no random seeds and no map order, so every
// gateway process built from the same config picks the same node for the same key. Unhealthy
// nodes are excluded per call with a Set; only their keys move, and they move back when the
// exclusion ends. PickLeast spreads calls that carry no session key by the power of two choices.
//
// The package does not own health checks, load counters or the upstreams themselves: callers
// keep those in a slice indexed like the names given to New.
package affinity

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// MaxNodes is the largest number of nodes a Ring holds: one bit per node in a Set.
const MaxNodes = 64

// Errors returned by New.
var (
	ErrTooManyNodes  = errors.New("affinity: more than 64 nodes")
	ErrEmptyName     = errors.New("affinity: empty node name")
	ErrDuplicateName = errors.New("affinity: duplicate node name")
	ErrHashCollision = errors.New("affinity: node names collide in 64-bit hash")
)

// Ring is a rendezvous-hash (highest random weight) ring over a fixed list of node names.
// Node i is the i-th name given to New.
//
// A Ring is immutable after New and safe for concurrent use. The zero value (and a nil *Ring)
// is an empty ring: Len returns 0 and Pick and PickLeast return -1.
type Ring struct {
	hashes []uint64 // Hash of each node name, by index
	all    Set      // bits 0..len(hashes)-1
}

// New returns a Ring over names, in order. It returns an error wrapping ErrTooManyNodes for more
// than MaxNodes names, ErrEmptyName for an empty name, ErrDuplicateName for a repeated name and
// ErrHashCollision for two distinct names with the same Hash (a tie would starve one of them).
// New does not keep names.
func New(names []string) (*Ring, error) {
	if len(names) > MaxNodes {
		return nil, fmt.Errorf("cannot build ring of %d nodes: %w", len(names), ErrTooManyNodes)
	}
	hashes := make([]uint64, len(names))
	for i, name := range names {
		if name == "" {
			return nil, fmt.Errorf("cannot add node %d: %w", i, ErrEmptyName)
		}
		h := xxhash.Sum64String(name)
		for j, prev := range hashes[:i] {
			if prev != h {
				continue
			}
			if names[j] == name {
				return nil, fmt.Errorf("cannot add node %q: %w", name, ErrDuplicateName)
			}
			return nil, fmt.Errorf("cannot add node %q next to %q: %w", name, names[j], ErrHashCollision)
		}
		hashes[i] = h
	}
	return &Ring{hashes: hashes, all: lowBits(len(names))}, nil
}

// Len returns the number of nodes in r.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.hashes)
}

// Hash returns the 64-bit hash used for keys and node names: xxHash64 with seed 0. It is
// exported so that logs can show the hash of a session key instead of the key. It does not
// allocate.
func Hash(key []byte) uint64 {
	return xxhash.Sum64(key)
}

// Pick returns the index of the node with the highest score for key among the nodes not in
// excluded, or -1 when every node is excluded or r is empty. It does not allocate.
//
// Excluding a node moves only the keys it would have won, each to its second choice; every other
// key stays where it was, and the moved keys return when the exclusion ends. Bits of excluded at
// or above Len are ignored.
func (r *Ring) Pick(key []byte, excluded Set) int {
	return r.PickHash(Hash(key), excluded)
}

// PickHash is Pick for a key already hashed with Hash, for callers that also log the hash.
func (r *Ring) PickHash(keyHash uint64, excluded Set) int {
	if r == nil {
		return -1
	}
	best, bestScore := -1, uint64(0)
	for i, h := range r.hashes {
		if excluded.Has(i) {
			continue
		}
		// mix is a bijection, so distinct node hashes never tie; on a tie the lower index would win.
		if s := mix(h ^ keyHash); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// PickLeast returns the less loaded of two distinct nodes chosen at random among those not in
// excluded, the only such node when there is one, or -1 when there is none. Equal loads go to the
// first of the two choices. rnd is a caller-supplied random value (a counter also works: it is
// mixed first), so the Ring keeps no state. load reports the current load of node i (for
// example its in-flight calls) and must not be nil; it is called at most twice.
//
// PickLeast does not allocate, but a method value passed as load (u.load) allocates at each
// call site: pass a long-lived func value built once instead.
func (r *Ring) PickLeast(rnd uint64, excluded Set, load func(i int) int64) int {
	a, b := r.PickTwo(rnd, excluded)
	if b >= 0 && load(b) < load(a) {
		return b
	}
	return a
}

// PickTwo returns two distinct nodes chosen at random among those not in excluded, for a caller
// that compares them by a cost of its own: a and -1 when a is the only such node, -1 and -1 when
// there is none. rnd is as for PickLeast. It does not allocate.
func (r *Ring) PickTwo(rnd uint64, excluded Set) (a, b int) {
	free := r.free(excluded)
	n := free.Len()
	switch n {
	case 0:
		return -1, -1
	case 1:
		return free.nth(0), -1
	}
	rnd = mix(rnd + 0x9e3779b97f4a7c15)
	ka := reduce(uint32(rnd), n)
	kb := reduce(uint32(rnd>>32), n-1)
	if kb >= ka {
		kb++ // distinct from ka, uniform over the other n-1
	}
	return free.nth(ka), free.nth(kb)
}

// free returns the nodes of r that are not in excluded.
func (r *Ring) free(excluded Set) Set {
	if r == nil {
		return 0
	}
	return r.all &^ excluded
}

// mix is the splitmix64 finalizer: a bijection of uint64 with full avalanche, so scores of
// different nodes for one key are independent and uniform.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// reduce maps x onto [0, n) without division (Lemire's multiply-shift); the bias is below n/2^32.
func reduce(x uint32, n int) int {
	return int(uint64(x) * uint64(n) >> 32) // n <= MaxNodes: no overflow
}
