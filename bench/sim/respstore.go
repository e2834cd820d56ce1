package sim

import "sync"

// inputItem is one stored input item of a response.
type inputItem struct {
	id   string
	role string // "" unless the item is a message
	raw  []byte // the item's JSON object, with its id
}

// storedResponse is what the store keeps of a response created with store=true.
type storedResponse struct {
	id, model     string
	body          []byte // the response object as GET answers it
	items         []inputItem
	inTok, outTok int64
}

// responseStore is the in-memory Responses store of one deployment: bounded, the
// oldest evicted first. The zero value is not usable: call init. Safe for concurrent use.
type responseStore struct {
	mu    sync.Mutex
	m     map[string]*storedResponse
	order []string
	limit int
}

func (rs *responseStore) init(limit int) {
	rs.m = make(map[string]*storedResponse)
	rs.limit = limit
}

func (rs *responseStore) get(id []byte) *storedResponse {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[b2s(id)]
}

func (rs *responseStore) put(r *storedResponse) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.m[r.id] = r
	rs.order = append(rs.order, r.id)
	for len(rs.m) > rs.limit && len(rs.order) > 0 {
		delete(rs.m, rs.order[0])
		rs.order = rs.order[1:]
	}
	if len(rs.order) > 2*rs.limit {
		rs.compact()
	}
}

// compact drops the ids of deleted responses from the eviction order.
func (rs *responseStore) compact() {
	live := rs.order[:0:0]
	for _, id := range rs.order {
		if _, ok := rs.m[id]; ok {
			live = append(live, id)
		}
	}
	rs.order = live
}

func (rs *responseStore) delete(id []byte) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, ok := rs.m[b2s(id)]; !ok {
		return false
	}
	delete(rs.m, string(id))
	return true
}
