package upstream

import "sync/atomic"

// Session shares: how much of a route's recent keyed picks each session
// made, so that the bound moves a heavy session before the light ones (see
// Route.chooseBounded).
const (
	// shareEpoch is the keyed picks after which every count halves: a
	// count weighs the last few thousand picks, the older ones less.
	shareEpoch = 1024
	// shareWidth is the cells of each of the two rows (a power of two).
	shareWidth = 1024
)

// sessionShares is a count-min sketch of the keyed picks of a route, by
// session hash, whose counts halve every shareEpoch picks: two rows of
// shareWidth cells, a session counting in one cell of each, its estimate the
// smaller. It keeps no keys and never grows (16 KB); a session estimate is
// never below its own decayed count, and a light session above it only when
// it shares both its cells with heavy ones.
//
// Each cell holds its count in the low 32 bits and the epoch it was last
// written in the high 32; the count halves once for each epoch since,
// when it is next read or written. Safe for concurrent use; the zero value
// is ready.
type sessionShares struct {
	picks atomic.Uint64
	rows  [2][shareWidth]atomic.Uint64
}

// add counts one pick of the session keyHash and returns its estimated
// share of the recent picks, this one included, in [0, 1].
func (s *sessionShares) add(keyHash uint64) float64 {
	n := s.picks.Add(1) - 1
	epoch := uint32(n / shareEpoch)
	est := uint64(1<<32 - 1)
	for row, i := range s.cells(keyHash) {
		est = min(est, bump(&s.rows[row][i], epoch))
	}
	// The picks made since, each worth 1, then 1/2 in the epoch before,
	// 1/4 in the one before that...: E × (1 - 2^-epoch) for the epochs
	// before this one.
	total := float64(n%shareEpoch+1) + shareEpoch*(1-1/float64(uint64(1)<<min(epoch, 63)))
	return min(float64(est)/total, 1)
}

// cells returns the session's cell in each row: the low and the high half
// of its hash.
func (s *sessionShares) cells(keyHash uint64) [2]uint64 {
	return [2]uint64{keyHash % shareWidth, (keyHash >> 32) % shareWidth}
}

// bump adds one to the cell at epoch, halving its count first for each
// epoch since it was last written, and returns the new count.
func bump(c *atomic.Uint64, epoch uint32) uint64 {
	for {
		old := c.Load()
		at := epoch
		if int32(epoch-uint32(old>>32)) < 0 {
			at = uint32(old >> 32) // never wind a cell's epoch back
		}
		count := decay(old, at) + 1
		if c.CompareAndSwap(old, uint64(at)<<32|count) {
			return count
		}
	}
}

// decay returns the count of cell value v read at epoch. An epoch before the
// cell's (a pick that drew its epoch before another wrote the cell) reads the
// count as it is.
func decay(v uint64, epoch uint32) uint64 {
	count, age := v&(1<<32-1), int32(epoch-uint32(v>>32))
	switch {
	case age <= 0:
		return count
	case age >= 32:
		return 0
	}
	return count >> age
}

// secondHomes remembers, for the sessions that left their first choice, the
// deployment they went to, so that they stay there rather than go back and
// forth (see Route.chooseBounded): shareWidth entries indexed by the high
// half of the session hash, each the low half (a tag) and the deployment
// plus one; 0 is empty. A session whose entry another took forgets its
// second home, and walks the ring again. Safe for concurrent use; the zero
// value is ready.
type secondHomes [shareWidth]atomic.Uint64

// get returns the deployment remembered for the session keyHash, or -1.
func (h *secondHomes) get(keyHash uint64) int {
	v := h[(keyHash>>32)%shareWidth].Load()
	if v == 0 || uint32(v>>32) != uint32(keyHash) {
		return -1
	}
	return int(v&0xff) - 1
}

// set remembers deployment i for the session keyHash; -1 forgets it.
func (h *secondHomes) set(keyHash uint64, i int) {
	e := &h[(keyHash>>32)%shareWidth]
	if i < 0 {
		if h.get(keyHash) >= 0 {
			e.CompareAndSwap(e.Load(), 0)
		}
		return
	}
	e.Store(uint64(uint32(keyHash))<<32 | uint64(i+1))
}
