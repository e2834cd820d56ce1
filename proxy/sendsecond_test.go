package proxy

import (
	"testing"
	"time"
)

// An attempt's second in the retry budget is the call's start for the first
// attempt, which the server read just before the handler, and the clock's
// for one sent again, which may come long after the start.
func TestSendSecond(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	c := &call{start: start, attempts: 1}
	if got := c.sendSecond(); got != start.Unix() {
		t.Fatalf("first attempt in second %d, want the start's %d", got, start.Unix())
	}
	c.attempts = 2
	before := time.Now().Unix()
	if got := c.sendSecond(); got < before {
		t.Fatalf("second attempt in second %d, want the clock's (%d or later)", got, before)
	}
}
