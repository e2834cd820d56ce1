package proxy

// The request body budget: the bytes of request bodies that calls in flight
// hold, across the gateway, are bounded by limits.max_buffered_body_bytes. A
// call reserves what it is about to hold before it reads: the declared
// Content-Length at once, a chunked body as its buffer grows. Past the
// budget, the call is answered 503 busy (before it reads the body when its
// length is declared) and the client may retry.

// reserveBody reserves n more bytes of the budget for the call, or answers
// 503 and returns false.
func (c *call) reserveBody(n int) bool {
	if n <= 0 {
		return true
	}
	if c.g.bodiesHeld.Add(int64(n)) > int64(c.st.cfg.Limits.MaxBufferedBodyBytes) {
		c.g.bodiesHeld.Add(-int64(n))
		c.fail(&Error{Status: 503, Reason: "body_budget", RetryAfter: 1,
			Message: "busy: the gateway holds too many request bodies; retry shortly"})
		return false
	}
	c.reserved += n
	return true
}

// reserveUpTo reserves what a buffer of capacity size needs beyond the
// call's reservation.
func (c *call) reserveUpTo(size int) bool { return c.reserveBody(size - c.reserved) }

// releaseBody gives the call's reservation back.
func (c *call) releaseBody() {
	if c.reserved > 0 {
		c.g.bodiesHeld.Add(-int64(c.reserved))
		c.reserved = 0
	}
}
