package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// paced builds a paced result of streams streams: RSS growth perStream bytes
// each, cpuPerEvent µs per event, every event delayed by delay.
func paced(streams int, perStream uint64, cpuPerEvent time.Duration, delay time.Duration, failed uint64) load.PacedResult {
	const events = 10
	d, f := load.NewHistogram(), load.NewHistogram()
	for range streams * events {
		d.Record(delay)
	}
	for range streams {
		f.Record(time.Millisecond)
	}
	r := load.PacedResult{Streams: streams, Completed: streams - int(failed), Events: uint64(streams * events),
		CPU: time.Duration(streams*events) * cpuPerEvent, RSSBefore: 1 << 20, MaxOpen: streams,
		RSSAtMaxOpen: 1<<20 + uint64(streams)*perStream, DelayHist: d, FirstEventAddedHist: f}
	if failed > 0 {
		r.Errors = map[string]uint64{load.ErrKindCheck: failed}
	}
	return r
}

func TestPacedTable(t *testing.T) {
	run := &Run{Scenarios: []Scenario{{Name: "llm-streams", Targets: []Target{
		{Name: "gateway", Paced: []load.PacedResult{
			paced(100, 30<<10, 10*time.Microsecond, 200*time.Microsecond, 0),
			paced(200, 30<<10, 10*time.Microsecond, 200*time.Microsecond, 0),
			paced(100, 34<<10, 14*time.Microsecond, 200*time.Microsecond, 2),
		}},
		{Name: "nginx", Paced: []load.PacedResult{
			paced(100, 15<<10, 8*time.Microsecond, 100*time.Microsecond, 0),
			paced(100, 15<<10, 8*time.Microsecond, 100*time.Microsecond, 0),
		}},
	}}}}
	rows := PacedRows(run)
	if len(rows) != 3 || rows[0].Streams != 100 || rows[2].Streams != 200 || rows[2].Target != "gateway" {
		t.Fatalf("rows %+v", rows)
	}
	gw := rows[0]
	if gw.Rounds != 2 || gw.Failed != 2 || gw.Total != 200 || gw.BytesPerStream != 32<<10 {
		t.Fatalf("gateway row %+v", gw)
	}
	if gw.CPUPerEvent < 11.9 || gw.CPUPerEvent > 12.1 || gw.CPUVsRef < 1.49 || gw.CPUVsRef > 1.51 {
		t.Fatalf("CPU per event %.2f, ÷ nginx %.2f; want 12, 1.5", gw.CPUPerEvent, gw.CPUVsRef)
	}
	if gw.BytesVsRef < 2.13 || gw.BytesVsRef > 2.14 || gw.P99VsRef < 1.99 || gw.P99VsRef > 2.01 || gw.Delay.Count != 2000 {
		t.Fatalf("bytes ÷ nginx %.2f, p99 ÷ nginx %.2f, %d delays", gw.BytesVsRef, gw.P99VsRef, gw.Delay.Count)
	}
	if rows[2].BytesVsRef != 0 {
		t.Fatalf("a ratio without an nginx row at 200 streams: %+v", rows[2])
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, run); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| llm-streams | 100 | gateway | 100 | 32.0 KiB | 2.13 | 12.0 | 1.50 |") {
		t.Fatalf("table:\n%s", buf.String())
	}
	// The histograms survive the JSON dump, so rows can be computed again.
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if again := PacedRows(&back); again[0].Delay != gw.Delay || again[0].FirstEventAdded.Count != 200 {
		t.Fatalf("after JSON: %+v", again[0])
	}
}
