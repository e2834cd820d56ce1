package report

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// result builds a finished load.Result of ok requests at latency p50 (half
// of them) and 2*p50 (the other half), over elapsed, with errs failures.
func result(ok uint64, p50 time.Duration, elapsed time.Duration, errs uint64) load.Result {
	h := load.NewHistogram()
	for i := range ok {
		if i%2 == 0 {
			h.Record(p50)
		} else {
			h.Record(2 * p50)
		}
	}
	r := load.Result{Mode: "closed", OK: ok, Requests: ok + errs, Elapsed: elapsed, LatencyHist: h, TTFBHist: load.NewHistogram()}
	if errs > 0 {
		r.Errors = map[string]uint64{load.ErrKindStatus: errs}
	}
	return load.Merge(r)
}

func round(ok uint64, p50, elapsed time.Duration, errs uint64, cpu time.Duration, rss uint64) Round {
	return Round{Result: result(ok, p50, elapsed, errs), Usage: &load.Usage{CPU: cpu, RSSPeak: rss}}
}

func testRun() *Run {
	return &Run{
		Title:   "test run",
		Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Notes:   []string{"2 cores", "nginx worker_processes 1"},
		Scenarios: []Scenario{
			{
				Name: "chat | small",
				Targets: []Target{
					{Name: "direct", Rounds: []Round{
						round(1000, time.Millisecond, time.Second, 0, 20*time.Millisecond, 10<<20),
						round(1200, time.Millisecond, time.Second, 0, 24*time.Millisecond, 12<<20),
						round(1100, time.Millisecond, time.Second, 0, 22*time.Millisecond, 11<<20),
					}},
					{Name: "gateway", Rounds: []Round{
						round(800, 1200*time.Microsecond, time.Second, 0, 40*time.Millisecond, 30<<20),
						round(900, 1200*time.Microsecond, time.Second, 0, 45*time.Millisecond, 40<<20),
						round(880, 1200*time.Microsecond, time.Second, 20, 45*time.Millisecond, 35<<20),
					}},
					{Name: "nginx", Rounds: []Round{
						round(1000, 1100*time.Microsecond, time.Second, 0, 30*time.Millisecond, 5<<20),
					}},
				},
			},
			{
				Name: "sse stream",
				Targets: []Target{
					{Name: "direct", Rounds: []Round{round(100, 50*time.Millisecond, time.Second, 0, 0, 0)},
						Idle: &load.IdleResult{Streams: 100, Opened: 100, RSSBefore: 10 << 20, RSSHeld: 11 << 20, BytesPerStream: 10485.76}},
					{Name: "gateway", Rounds: []Round{{Result: result(90, 51*time.Millisecond, time.Second, 0)}}},
					{Name: "nginx", Skipped: "nginx not available: not installed"},
				},
			},
			{
				Name:    "nothing measured",
				Targets: []Target{{Name: "nginx", Skipped: "nginx not available: x"}},
			},
		},
	}
}

func TestRows(t *testing.T) {
	rows := Rows(testRun())
	if len(rows) != 7 {
		t.Fatalf("%d rows, want 7", len(rows))
	}
	d, g, n := rows[0], rows[1], rows[2]
	if d.RPS != 1100 || g.RPS != 880 || n.RPS != 1000 {
		t.Fatalf("median rps %v %v %v, want 1100 880 1000", d.RPS, g.RPS, n.RPS)
	}
	if g.AddedP50 != 200*time.Microsecond || !g.HasDirect || d.AddedP50 != 0 {
		t.Fatalf("added p50 %v (direct %v)", g.AddedP50, d.AddedP50)
	}
	if g.VsDirect != 0.8 || g.VsReference != 0.88 || n.VsReference != 1 {
		t.Fatalf("ratios %v %v %v", g.VsDirect, g.VsReference, n.VsReference)
	}
	// 130 ms over 2,600 requests.
	if g.CPUPerRequest != 50 || g.PeakRSS != 40<<20 || g.Errors != 20 || g.Requests != 2600 {
		t.Fatalf("cpu %v rss %d errors %d requests %d", g.CPUPerRequest, g.PeakRSS, g.Errors, g.Requests)
	}
	sse := rows[4]
	if sse.CPUPerRequest != 0 || sse.PeakRSS != 0 || sse.VsReference != 0 || sse.VsDirect != 0.9 {
		t.Fatalf("sse gateway row %+v", sse)
	}
	if rows[5].Skipped == "" || rows[6].Skipped == "" {
		t.Fatal("skipped targets not marked")
	}
}

func TestWriteMarkdown(t *testing.T) {
	run := testRun()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, run); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, sc := range run.Scenarios {
		for _, tg := range sc.Targets {
			row := "| " + cell(sc.Name) + " | " + tg.Name + " |"
			if !strings.Contains(md, row) {
				t.Fatalf("no row starting %q in:\n%s", row, md)
			}
		}
	}
	for _, want := range []string{
		"# test run", "- 2 cores", "| scenario | target | req/s | p50 | p90 | p99 | p99.9 | +p50 vs direct | req/s ÷ direct | req/s ÷ nginx | CPU µs/req | peak RSS | errors |",
		`| chat \| small | gateway | 880 | 1.20ms |`, "| +200µs | 0.80 | 0.88 | 50.0 | 40.0 MiB | 20 (0.77%) |",
		"| sse stream | nginx | skipped: nginx not available: not installed |",
		"| sse stream | direct | 100 | 100 | 10.0 MiB | 11.0 MiB | 10.2 KiB | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table line has the same number of cells as its header.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| chat") || strings.HasPrefix(line, "| sse stream | gateway") || strings.HasPrefix(line, "| nothing") {
			if got := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); got != 14 {
				t.Fatalf("%d separators in %q, want 14", got, line)
			}
		}
	}
}

func TestFormatDuration(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := FormatDuration(d); got != want {
			t.Fatalf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	f(0, "0µs")
	f(850*time.Microsecond, "850µs")
	f(1200*time.Microsecond, "1.20ms")
	f(45600*time.Microsecond, "45.6ms")
	f(2500*time.Millisecond, "2.50s")
	f(-300*time.Microsecond, "-300µs")
}

func TestWriteAllPlotsDecode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	run := testRun()
	if err := WriteAll(dir, run); err != nil {
		t.Fatal(err)
	}
	want := []string{"01-chat-small-latency.png", "01-chat-small-throughput.png", "02-sse-stream-latency.png", "02-sse-stream-throughput.png"}
	for _, name := range want {
		if b := pngBounds(t, filepath.Join(dir, name)); b.Dx() < 100 || b.Dy() < 100 {
			t.Fatalf("%s is %v", name, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "03-nothing-measured-latency.png")); !os.IsNotExist(err) {
		t.Fatalf("plot written for a scenario with no measured target: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if !bytes.Contains(md, []byte("]("+name+")")) {
			t.Fatalf("report.md does not link %s", name)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	run := testRun()
	var b bytes.Buffer
	if err := WriteJSON(&b, run); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	before, after := Rows(run), Rows(back)
	if len(before) != len(after) {
		t.Fatalf("%d rows, %d after JSON", len(before), len(after))
	}
	for i := range before {
		x, y := before[i], after[i]
		if x.RPS != y.RPS || x.Latency != y.Latency || x.AddedP50 != y.AddedP50 || x.CPUPerRequest != y.CPUPerRequest || x.Skipped != y.Skipped {
			t.Fatalf("row %d changed by JSON:\n%+v\n%+v", i, x, y)
		}
	}
	if back.Scenarios[1].Targets[0].Idle.BytesPerStream != 10485.76 {
		t.Fatal("idle result lost")
	}
	if _, err := ReadJSON(strings.NewReader(`{"scenarios":[{"targets":[{"rounds":[{"result":{"latency_hist":"!!"}}]}]}]}`)); err == nil {
		t.Fatal("ReadJSON accepted a broken histogram")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{"Chat | small": "chat-small", "SSE/stream 10k": "sse-stream-10k", "***": "scenario", "a--b": "a-b"} {
		if got := slug(in); got != want {
			t.Fatalf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// pngBounds decodes the PNG file at path and returns its bounds.
func pngBounds(t *testing.T, path string) image.Rectangle {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img.Bounds()
}
