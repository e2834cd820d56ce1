package report

import (
	"bufio"
	"fmt"
	"slices"

	"github.com/modelgate/gateway/bench/load"
)

// PacedRow is one target of a paced-stream scenario at one size, over all
// its rounds.
type PacedRow struct {
	Scenario string
	Target   string
	Streams  int // asked for
	Rounds   int
	// MaxOpen is the fewest streams seen open at once in a round's peak.
	MaxOpen int
	// BytesPerStream is the median over the rounds of the RSS growth per
	// open stream; CPUPerEvent the CPU µs per event over all rounds.
	BytesPerStream float64
	CPUPerEvent    float64
	// Delay and FirstEventAdded summarise all rounds' events and streams.
	Delay, FirstEventAdded load.Summary
	Failed, Total          uint64 // streams
	// VsReference are BytesPerStream, CPUPerEvent and Delay.P99 over the
	// reference's at the same size; 0 when unknown.
	BytesVsRef, CPUVsRef, P99VsRef float64
}

// PacedRows computes the paced-stream rows of run: per scenario, per size,
// targets in order.
func PacedRows(run *Run) []PacedRow {
	var rows []PacedRow
	for i := range run.Scenarios {
		rows = append(rows, scenarioPacedRows(run, &run.Scenarios[i])...)
	}
	return rows
}

// scenarioPacedRows returns the paced-stream rows of sc: per size, targets
// in order.
func scenarioPacedRows(run *Run, sc *Scenario) []PacedRow {
	var rows []PacedRow
	for _, size := range pacedSizes(sc) {
		rows = append(rows, pacedSizeRows(run, sc, size)...)
	}
	return rows
}

func pacedSizes(sc *Scenario) []int {
	var sizes []int
	for _, t := range sc.Targets {
		for _, r := range t.Paced {
			if !slices.Contains(sizes, r.Streams) {
				sizes = append(sizes, r.Streams)
			}
		}
	}
	slices.Sort(sizes)
	return sizes
}

func pacedSizeRows(run *Run, sc *Scenario, size int) []PacedRow {
	var rows []PacedRow
	for _, t := range sc.Targets {
		if row, ok := pacedRow(sc.Name, &t, size); ok {
			rows = append(rows, row)
		}
	}
	var ref *PacedRow
	for i := range rows {
		if rows[i].Target == run.reference() {
			ref = &rows[i]
		}
	}
	if ref == nil {
		return rows
	}
	for i := range rows {
		r := &rows[i]
		r.BytesVsRef = ratio(r.BytesPerStream, ref.BytesPerStream)
		r.CPUVsRef = ratio(r.CPUPerEvent, ref.CPUPerEvent)
		r.P99VsRef = ratio(float64(r.Delay.P99), float64(ref.Delay.P99))
	}
	return rows
}

// pacedRow merges the rounds of t at size; ok is false when t has none.
func pacedRow(scenario string, t *Target, size int) (PacedRow, bool) {
	row := PacedRow{Scenario: scenario, Target: t.Name, Streams: size}
	delay, first := load.NewHistogram(), load.NewHistogram()
	var perStream []float64
	var events uint64
	var cpuNs float64
	for _, r := range t.Paced {
		if r.Streams != size {
			continue
		}
		if row.Rounds == 0 || r.MaxOpen < row.MaxOpen {
			row.MaxOpen = r.MaxOpen
		}
		row.Rounds++
		perStream = append(perStream, r.BytesPerStream())
		events += r.Events
		cpuNs += float64(r.CPU.Nanoseconds())
		delay.Merge(r.DelayHist)
		first.Merge(r.FirstEventAddedHist)
		row.Failed += r.ErrorCount()
		row.Total += uint64(r.Streams)
	}
	if row.Rounds == 0 {
		return row, false
	}
	row.BytesPerStream = median(perStream)
	if events > 0 {
		row.CPUPerEvent = cpuNs / 1e3 / float64(events)
	}
	row.Delay, row.FirstEventAdded = delay.Summary(), first.Summary()
	return row, true
}

func writePacedTable(w *bufio.Writer, run *Run) {
	rows := PacedRows(run)
	if len(rows) == 0 {
		return
	}
	ref := run.reference()
	fmt.Fprintf(w, "| scenario | streams | target | most open | RSS per stream | ÷ %s | CPU µs per event | ÷ %s | event delay p50 | p99 | p99.9 | p99 ÷ %s | first event added p50 | p99 | failed streams |\n",
		ref, ref, ref)
	w.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Scenario), r.Streams, cell(r.Target), r.MaxOpen,
			perStreamCell(r.BytesPerStream), ratioCell(r.BytesVsRef), cpuCell(r.CPUPerEvent), ratioCell(r.CPUVsRef),
			FormatDuration(r.Delay.P50), FormatDuration(r.Delay.P99), FormatDuration(r.Delay.P999), ratioCell(r.P99VsRef),
			FormatDuration(r.FirstEventAdded.P50), FormatDuration(r.FirstEventAdded.P99), errorsCell(r.Failed, r.Total))
	}
	w.WriteString("\n")
}
