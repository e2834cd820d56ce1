package proxy

import (
	"strconv"
	"sync"
)

// The request body budget: the bytes of request bodies that calls in flight
// hold, across the gateway, are bounded by limits.max_buffered_body_bytes.
// A call counts every copy of its request body it holds (bodyShares): the
// body read from the client, the copy without session_id or with stored
// files inlined, the copy with a deployment's own model name, and, while
// files are inlined, the inliner's buffers (the body without session_id and
// the bytes of the largest file read). It reserves what a copy is about to
// take before making it: the declared Content-Length at once, a chunked body
// as its buffer grows, a copy's size as it can be known in advance (an
// inlined file's base64 from the file's size).
//
// Past the budget, a call that could fit once other calls let go is
// answered 503 busy with Retry-After (before it reads the body when its
// length is declared); one that needs more than the whole budget alone is
// answered 413, as retrying would not help. A copy dropped while the call
// goes on (a large body once a streamed answer begins) gives its share back
// at once; the rest goes back when the call is released.

// bodyShares is the call's share of the budget, per copy of the request
// body: each is what the copy was reserved for (at least its length).
type bodyShares struct {
	body    int // call.body, read from the client
	spliced int // call.spliced: without session_id, or with files inlined
	renamed int // call.renamed: with a deployment's own model name
	inline  int // the inliner's buffers, while inlineFiles runs
}

func (s *bodyShares) total() int { return s.body + s.spliced + s.renamed + s.inline }

// reserveShare grows the call's share *share to size bytes, reserving the
// difference, or answers 503 (or 413, see above) and returns false.
func (c *call) reserveShare(share *int, size int) bool {
	if e := c.growShare(share, size); e != nil {
		c.fail(e)
		return false
	}
	return true
}

// growShare grows *share to size bytes, or returns why it cannot.
func (c *call) growShare(share *int, size int) *Error {
	n := size - *share
	if n <= 0 {
		return nil
	}
	limit := c.st.cfg.Limits.MaxBufferedBodyBytes
	if c.shares.total()+n > limit {
		return &Error{Status: 413, Reason: "body_budget_too_small",
			Message: "the request, with the copies the gateway makes of it, needs more memory than the gateway's whole budget for request bodies: " +
				strconv.Itoa(limit) + " bytes"}
	}
	if c.g.bodiesHeld.Add(int64(n)) > int64(limit) {
		c.g.bodiesHeld.Add(-int64(n))
		return &Error{Status: 503, Reason: "body_budget", RetryAfter: 1,
			Message: "busy: the gateway holds too many request bodies; retry shortly"}
	}
	*share = size
	return nil
}

// reserveUpTo reserves what a body buffer of capacity size needs beyond the
// body's share.
func (c *call) reserveUpTo(size int) bool { return c.reserveShare(&c.shares.body, size) }

// releaseShare gives one share back, when its copy is dropped.
func (c *call) releaseShare(share *int) {
	if *share > 0 {
		c.g.bodiesHeld.Add(-int64(*share))
		*share = 0
	}
}

// releaseBody gives all the call's shares back.
func (c *call) releaseBody() {
	if n := c.shares.total(); n > 0 {
		c.g.bodiesHeld.Add(-int64(n))
	}
	c.shares = bodyShares{}
}

// reserveRenamed reserves the copy send makes of body for a deployment that
// knows the call's model by another name (see rename), before the first
// attempt: at most the client's body with the longest such name.
func (c *call) reserveRenamed(body []byte) bool {
	if c.model == nil || c.model.renamed == nil || c.ep == epGenerateContent || len(body) == 0 || c.fields.Model == nil {
		return true
	}
	longest := 0
	for _, pm := range c.model.renamed {
		longest = max(longest, len(pm.json))
	}
	return c.reserveShare(&c.shares.renamed, max(len(body), len(c.body))+longest)
}

// A streamed answer written on a hijacked connection needs none of the
// request body's copies once its head is decided: its call gives them back
// then (dropBodies), with their shares of the budget, instead of holding
// them for the stream's seconds or minutes. They go to a pool of spare
// buffers that a call without a buffer takes from before it reads a body
// (spareBody), not to the garbage collector: held streams make no garbage,
// so no collection would come to free them. Only buffers up to maxHeldBody
// are pooled; a larger one was dropped once the request was sent
// (dropLargeBodies).

// spareBuffer holds a spare body buffer in spareBodies, or none in
// spareHolders, so that a buffer changes hands without an allocation.
type spareBuffer struct{ b []byte }

var spareBodies, spareHolders sync.Pool

// putSpareBody puts b in the spare pool.
func putSpareBody(b []byte) {
	if cap(b) == 0 || cap(b) > maxHeldBody {
		return
	}
	h, _ := spareHolders.Get().(*spareBuffer)
	if h == nil {
		h = new(spareBuffer)
	}
	h.b = b[:0]
	spareBodies.Put(h)
}

// orSpare returns b emptied, or a spare buffer when b has none (a stream
// took the call's: see dropBodies).
func orSpare(b []byte) []byte {
	if cap(b) == 0 {
		return spareBody()
	}
	return b[:0]
}

// spareBody returns a spare body buffer, empty, or nil when there is none.
func spareBody() []byte {
	h, _ := spareBodies.Get().(*spareBuffer)
	if h == nil {
		return nil
	}
	b := h.b
	h.b = nil
	spareHolders.Put(h)
	return b
}

// dropBodies gives every copy of the request body the call holds back to
// the spare pool, and their shares to the budget; the peeked fields, which
// point into the body, go with it. The call's bodyLen keeps the body's
// length (see dropLargeBodies).
func (c *call) dropBodies() {
	c.fields.Reset()
	putSpareBody(c.body)
	putSpareBody(c.spliced)
	putSpareBody(c.renamed)
	c.body, c.spliced, c.renamed = nil, nil, nil
	c.releaseBody()
}
