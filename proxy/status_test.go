package proxy

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

// The status page names every deployment with its health, counts and the
// config in force, and holds no key or provider secret.
func TestStatusPage(t *testing.T) {
	// Failover off: d1-gamma's 5xx answers reach the client and are counted
	// as its answers, whatever the retry budget allows at that moment.
	noFailover := func(y string) string { return longCooldown(y) + "\nretry: {attempts: 1}\n" }
	e, access := newOpsEnv(t, noFailover, Options{Version: "v1.2.3-test"})
	e.deploymentOf(bearer(keyA), chatBody(""))
	e.sim("d1").SetFault(sim.Fault{Status: 500})
	for range 2 {
		e.gammaDraw("one") // d1-gamma fails twice: excluded
	}
	// A streamed answer is counted after its last byte reached the client;
	// the access line is the last thing a call writes.
	eventually(t, "3 access lines", func() bool { return strings.Count(access.String(), "\n") == 3 })
	status, ct, body := adminGet(e.gw, "/status")
	page := string(body)
	if status != 200 || ct != "text/html; charset=utf-8" {
		t.Fatalf("/status: %d %q", status, ct)
	}
	for _, want := range []string{
		"v1.2.3-test", "store</td><td id=\"store\">open, 0 files",
		`data-name="d1-gamma" data-state="excluded"`, `data-name="d2-gamma" data-state="healthy"`,
		`data-name="d1-alpha" data-state="healthy"`, "4 · 2 · 6", "&#34;gamma&#34;: {", "&#34;healthy&#34;: 1,",
		e.gw.state.Load().fingerprint,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q in the page:\n%s", want, page)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(e.gw.state.Load().fingerprint) {
		t.Errorf("fingerprint %q", e.gw.state.Load().fingerprint)
	}
	// Two gamma 5xx answers on d1-gamma, one 2xx on the chat's deployment.
	if !regexp.MustCompile(`data-name="d1-gamma"[^\n]*\n[^\n]*\n[^\n]*\n<td class="num">0</td><td class="num">0</td><td class="num">2</td>\n`).MatchString(page) {
		t.Errorf("d1-gamma's 5xx count is not 2:\n%s", page)
	}
	for _, secret := range []string{keyA, keyB, HashKey(keyB), "up-alpha", "up-beta", "up-gamma", e.sims[0].Addr(), e.sims[1].Addr()} {
		if strings.Contains(page, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
}

// Rates show once a sample at least statusWindow old exists.
func TestStatusSamplerWindow(t *testing.T) {
	var s statusSampler
	t0 := time.Unix(1000, 0)
	c := func(n uint64) map[string][numClasses]uint64 { return map[string][numClasses]uint64{"d": {2: n}} }
	if _, ok := s.baseline(t0, c(1)); ok {
		t.Fatal("a baseline before any sample")
	}
	if _, ok := s.baseline(t0.Add(5*time.Second), c(2)); ok {
		t.Fatal("a baseline younger than the window")
	}
	b, ok := s.baseline(t0.Add(12*time.Second), c(3))
	if !ok || !b.at.Equal(t0) || b.counts["d"][2] != 1 {
		t.Fatalf("baseline %+v %v", b, ok)
	}
	for i := range 20 {
		s.baseline(t0.Add(time.Duration(20+10*i)*time.Second), c(4))
	}
	if len(s.samples) != 8 {
		t.Fatalf("%d samples kept", len(s.samples))
	}
}
