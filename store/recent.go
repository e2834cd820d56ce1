package store

import (
	"hash/maphash"
	"sync/atomic"
)

// recentSlots is the number of records recentResponses holds at most; a
// power of two. Full, with ids of OpenAI's length, it holds about 2 MiB.
const recentSlots = 1 << 14

// recentResponses holds the Responses records this process put last, so
// that reading one back soon after (a client polling a background response,
// a continuation naming the response before it, a retrieve after a create)
// costs a hash and a comparison instead of a Pebble lookup: about 2 µs of a
// retrieve's CPU under load (see docs/performance.md).
//
// It is direct-mapped: a record goes in the slot its id hashes to, displacing
// the one there. It is filled only by writes, under the record's stripe lock,
// and emptied by deletes and reclaims under the same lock, so it never holds
// a record that Pebble no longer has or has in another form: a read that
// missed does not fill it, since it could race with a delete. A miss reads
// Pebble as before.
//
// Safe for concurrent use; get takes no lock and allocates nothing.
type recentResponses struct {
	seed  maphash.Seed
	slots [recentSlots]atomic.Pointer[Response]
}

func newRecentResponses() *recentResponses {
	return &recentResponses{seed: maphash.MakeSeed()}
}

func (c *recentResponses) slot(id string) *atomic.Pointer[Response] {
	return &c.slots[maphash.String(c.seed, id)&(recentSlots-1)]
}

// get returns the record of id when it is held.
func (c *recentResponses) get(id string) (Response, bool) {
	r := c.slot(id).Load()
	if r == nil || r.ID != id {
		return Response{}, false
	}
	return *r, true
}

// put holds r, which must not change after. The caller holds r.ID's stripe
// lock and has committed r.
func (c *recentResponses) put(r *Response) { c.slot(r.ID).Store(r) }

// drop forgets the record of id, if held. The caller holds id's stripe lock
// and has committed its removal. A record of another id in the slot stays.
func (c *recentResponses) drop(id string) {
	s := c.slot(id)
	if r := s.Load(); r != nil && r.ID == id {
		s.CompareAndSwap(r, nil)
	}
}
