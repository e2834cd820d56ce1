package report

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// grouped returns a round whose grouped calls are fast ones at 5 ms and
// slow ones at 500 ms.
func grouped(fast, slow uint64) Round {
	g := func(n uint64, d time.Duration) *load.Group {
		h := load.NewHistogram()
		for range n {
			h.Record(d)
		}
		return &load.Group{OK: n, TTFB: h.Summary(), TTFBHist: h}
	}
	r := result(fast+slow, time.Millisecond, time.Second, 0)
	r.Groups = map[string]*load.Group{"fast": g(fast, 5*time.Millisecond), "slow": g(slow, 500*time.Millisecond)}
	return Round{Result: r}
}

// The group rows merge the rounds: each deployment's share of the calls and
// its first byte, and the first byte of all the target's calls, whose p99
// is the slow one's once it has more than 1 % of them.
func TestGroupRows(t *testing.T) {
	run := &Run{Scenarios: []Scenario{{Name: "slow-deployment", Targets: []Target{
		{Name: "gateway", Rounds: []Round{grouped(998, 1), grouped(999, 2)}},
		{Name: "nginx", Rounds: []Round{grouped(980, 20), grouped(980, 20)}},
		{Name: "plain", Rounds: []Round{{Result: result(10, time.Millisecond, time.Second, 0)}}},
	}}}}
	rows := GroupRows(run)
	if len(rows) != 4 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	f := func(r GroupRow, target, group string, ok uint64, allP99 time.Duration) {
		t.Helper()
		if r.Target != target || r.Group != group || r.OK != ok || r.AllTTFB.P99 < allP99*99/100 || r.AllTTFB.P99 > allP99*101/100 {
			t.Fatalf("row %+v, want %s %s %d p99 %v", r, target, group, ok, allP99)
		}
	}
	f(rows[0], "gateway", "fast", 1997, 5*time.Millisecond)
	f(rows[1], "gateway", "slow", 3, 5*time.Millisecond)
	f(rows[2], "nginx", "fast", 1960, 500*time.Millisecond)
	f(rows[3], "nginx", "slow", 40, 500*time.Millisecond)
	if s := rows[3].Share; s < 0.0199 || s > 0.0201 {
		t.Fatalf("nginx slow share %v", s)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeGroupTable(w, run)
	w.Flush()
	if !strings.Contains(b.String(), "| slow-deployment | nginx | slow | 40 | 2.00 % |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
