package store

import (
	"hash/maphash"
	"sync/atomic"
)

// interned returns a response record's repeated strings without a copy per
// lookup. A record's owner, model and deployment are a key id, a model id
// and a deployment name of the gateway's config: few values, read again on
// every retrieve and every continuation. Decoding each into a new string
// cost three allocations per lookup.
//
// The table is direct-mapped: a slot holds the last string that hashed to
// it, and a lookup that finds another (a collision, or a value seen once)
// allocates the string as before and takes the slot. Its size bounds what it
// holds whatever the records contain, and a value longer than internMax is
// never kept.
var interned internTable

const (
	internSlots = 512
	internMax   = 64
)

type internTable struct {
	slots [internSlots]atomic.Pointer[string]
}

var internSeed = maphash.MakeSeed()

// get returns b as a string: the slot's, when it holds the same bytes.
func (t *internTable) get(b []byte) string {
	if len(b) == 0 || len(b) > internMax {
		return string(b)
	}
	slot := &t.slots[maphash.Bytes(internSeed, b)%internSlots]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
