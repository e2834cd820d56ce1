package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// unsampled is p with no process sampled, as the direct target is.
func unsampled(p load.PacedResult) load.PacedResult {
	p.CPU, p.RSSBefore, p.RSSAtMaxOpen = 0, 0, 0
	return p
}

func pacedRun() *Run {
	return &Run{Scenarios: []Scenario{
		{Name: "chat", Targets: []Target{{Name: "gateway", Rounds: []Round{
			round(100, time.Millisecond, time.Second, 0, time.Millisecond, 1<<20)}}}},
		{Name: "llm-streams", Targets: []Target{
			{Name: "direct", Paced: []load.PacedResult{
				unsampled(paced(100, 0, 0, 50*time.Microsecond, 0)),
				unsampled(paced(200, 0, 0, 60*time.Microsecond, 0)),
			}},
			{Name: "gateway", Paced: []load.PacedResult{
				paced(100, 30<<10, 10*time.Microsecond, 200*time.Microsecond, 0),
				paced(100, 34<<10, 14*time.Microsecond, 300*time.Microsecond, 0),
				paced(200, 28<<10, 9*time.Microsecond, 2*time.Millisecond, 1),
			}},
			{Name: "fasthttp-relay", Skipped: "cannot run: refused"},
			{Name: "nginx", Paced: []load.PacedResult{
				paced(100, 15<<10, 8*time.Microsecond, 100*time.Microsecond, 0),
			}},
		}},
		// One size, the simulator alone: only the delay can be plotted.
		{Name: "llm streams one size", Targets: []Target{
			{Name: "direct", Paced: []load.PacedResult{unsampled(paced(100, 0, 0, 50*time.Microsecond, 0))}},
		}},
		{Name: "nothing measured", Targets: []Target{
			{Name: "nginx", Skipped: "nginx not available: x"},
			// Every stream failed: no delay, no memory, no CPU.
			{Name: "gateway", Paced: []load.PacedResult{{Streams: 100, Errors: map[string]uint64{load.ErrKindCheck: 100}}}},
		}},
	}}
}

// The plots show the table's values: one series per target with a row, a
// point per size where the value was measured.
func TestPacedSeriesMatchTable(t *testing.T) {
	run := pacedRun()
	sc := &run.Scenarios[1]
	rows := scenarioPacedRows(run, sc)
	memory := pacedSeriesOf(sc, rows, func(r *PacedRow) (float64, bool) {
		return r.BytesPerStream / 1024, r.BytesPerStream > 0
	})
	var names []string
	for _, s := range memory {
		names = append(names, s.target)
	}
	if !slices.Equal(names, []string{"direct", "gateway", "nginx"}) {
		t.Fatalf("series %v, want direct, gateway, nginx (the skipped target left out)", names)
	}
	if len(memory[0].pts) != 0 || memory[1].color != 1 || memory[2].color != 3 {
		t.Fatalf("direct has memory points %v, or colours %d %d are not the targets' indexes", memory[0].pts, memory[1].color, memory[2].color)
	}
	gw := memory[1].pts
	if len(gw) != 2 || gw[0].X != 100 || gw[1].X != 200 {
		t.Fatalf("gateway points %v, want at 100 and 200 streams", gw)
	}
	for _, r := range rows {
		if r.Target == "gateway" && r.Streams == 100 && gw[0].Y != r.BytesPerStream/1024 {
			t.Fatalf("plot %v KiB, table %v B", gw[0].Y, r.BytesPerStream)
		}
	}
	if gw[0].Y != 32 {
		t.Fatalf("gateway at 100 streams %v KiB, want 32 (median of rounds, as the table)", gw[0].Y)
	}
}

func TestWritePacedPlots(t *testing.T) {
	dir := t.TempDir()
	run := pacedRun()
	if err := WriteAll(dir, run); err != nil {
		t.Fatal(err)
	}
	want := []string{"01-chat-latency.png", "01-chat-throughput.png",
		"02-llm-streams-memory.png", "02-llm-streams-cpu.png", "02-llm-streams-delay.png",
		"03-llm-streams-one-size-delay.png"}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pngs []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".png" {
			pngs = append(pngs, e.Name())
		}
	}
	if !slices.Equal(pngs, slices.Sorted(slices.Values(want))) {
		t.Fatalf("plots %v, want %v", pngs, want)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if b := pngBounds(t, filepath.Join(dir, name)); b.Dx() < 300 || b.Dy() < 200 {
			t.Fatalf("%s is %v", name, b)
		}
		if !bytes.Contains(md, []byte("]("+name+")")) {
			t.Fatalf("report.md does not link %s:\n%s", name, md)
		}
	}
	if !bytes.Contains(md, []byte("## llm-streams\n")) || bytes.Contains(md, []byte("## nothing measured")) {
		t.Fatalf("plot sections:\n%s", md)
	}
}
