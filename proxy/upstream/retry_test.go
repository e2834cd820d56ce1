package upstream

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const def = 10 * time.Second
	f := func(v string, want time.Duration) {
		t.Helper()
		if got := retryAfter([]byte(v), now, def); got != want {
			t.Fatalf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	f("", def)
	f("0", 0)
	f("30", 30*time.Second)
	f("86400", maxRetryAfter)
	f("Tue, 24 Nov 2026 12:01:30 GMT", 90*time.Second)
	f("Tue, 24 Nov 2026 11:00:00 GMT", 0)
	f("Wed, 25 Nov 2026 12:00:00 GMT", maxRetryAfter)
	f("-5", def)
	f("soon", def)
}

func TestBudget(t *testing.T) {
	var b Budget
	const now = 1_000_000
	// The floor: 3 a second over the 10 s window, with no calls at all.
	for i := range 30 {
		if !b.Allows(now, 20, 3) {
			t.Fatalf("retry %d refused under the floor", i)
		}
		b.Spend(now)
	}
	if b.Allows(now, 20, 3) {
		t.Fatal("retry allowed over the floor")
	}
	// 20% of 200 calls is 40: ten more.
	for range 200 {
		b.called(now - 5)
	}
	for i := range 10 {
		if !b.Allows(now, 20, 3) {
			t.Fatalf("retry %d refused within 20%%", i)
		}
		b.Spend(now)
	}
	if b.Allows(now, 20, 3) {
		t.Fatal("retry allowed over 20% of calls")
	}
	// Ten seconds later the window holds none of it.
	if b.Allows(now+10, 20, 0) {
		t.Fatal("an empty window with no floor must refuse")
	}
	b.called(now + 10)
	if b.Allows(now+10, 20, 0) {
		t.Fatal("one call allows no retry at 20%")
	}
	if !b.Allows(now+10, 20, 1) {
		t.Fatal("the old seconds still count")
	}
}

// A 429's retry-after counts in whatever case the upstream names it: the
// deployment is excluded for its 7 s, not for the hour of its cooldown.
func TestRetryAfterAnyCase(t *testing.T) {
	for _, name := range []string{"Retry-After", "retry-after", "RETRY-AFTER"} {
		var r Relay
		r.dep = unreachableDeployment("beta", config.Health{Cooldown: config.Duration(time.Hour)})
		head := "HTTP/1.1 429 Too Many Requests\r\n" + name + ": 7\r\nContent-Length: 0\r\n\r\n"
		if _, err := wire.ReadHead(bufio.NewReader(strings.NewReader(head)), false, &r.resp, &r.head); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		r.judge(429)
		if until := r.dep.ExcludedUntil(now.UnixNano()); until.Before(now.Add(6*time.Second)) || until.After(now.Add(time.Minute)) {
			t.Errorf("%s: 7: excluded until %v from %v", name, until, now)
		}
	}
}
