package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown writes run as markdown: the notes, one table over all
// scenarios and targets, and a table of idle-stream memory if measured.
func WriteMarkdown(w io.Writer, run *Run) error {
	return writeMarkdown(w, run, nil)
}

// writeMarkdown also links the plots of each scenario, by scenario index.
func writeMarkdown(w io.Writer, run *Run, plots map[int][]string) error {
	bw := bufio.NewWriter(w)
	title := run.Title
	if title == "" {
		title = "Benchmark"
	}
	fmt.Fprintf(bw, "# %s\n\n", title)
	if !run.Started.IsZero() {
		fmt.Fprintf(bw, "Started %s.\n\n", run.Started.UTC().Format(time.RFC3339))
	}
	for _, n := range run.Notes {
		fmt.Fprintf(bw, "- %s\n", n)
	}
	if len(run.Notes) > 0 {
		bw.WriteString("\n")
	}
	writeTable(bw, run)
	writeIdleTable(bw, run)
	writeGroupTable(bw, run)
	writePacedTable(bw, run)
	writePlotLinks(bw, run, plots)
	return bw.Flush()
}

func writeTable(w *bufio.Writer, run *Run) {
	fmt.Fprintf(w, "| scenario | target | req/s | p50 | p90 | p99 | p99.9 | +p50 vs %s | req/s ÷ %s | req/s ÷ %s | CPU µs/req | peak RSS | errors |\n",
		run.direct(), run.direct(), run.reference())
	w.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range Rows(run) {
		if r.Skipped != "" {
			fmt.Fprintf(w, "| %s | %s | skipped: %s |  |  |  |  |  |  |  |  |  |  |\n",
				cell(r.Scenario), cell(r.Target), cell(r.Skipped))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Scenario), cell(r.Target), r.RPS,
			FormatDuration(r.Latency.P50), FormatDuration(r.Latency.P90),
			FormatDuration(r.Latency.P99), FormatDuration(r.Latency.P999),
			addedCell(&r, run.direct()), ratioCell(r.VsDirect), ratioCell(r.VsReference),
			cpuCell(r.CPUPerRequest), bytesCell(r.PeakRSS), errorsCell(r.Errors, r.Requests))
	}
	w.WriteString("\n")
}

func writeIdleTable(w *bufio.Writer, run *Run) {
	header := false
	for _, sc := range run.Scenarios {
		for _, t := range sc.Targets {
			if t.Idle == nil {
				continue
			}
			if !header {
				w.WriteString("| scenario | target | streams held | of | RSS before | RSS held | per stream | errors |\n")
				w.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
				header = true
			}
			i := t.Idle
			var errs uint64
			for _, n := range i.Errors {
				errs += n
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %d |\n",
				cell(sc.Name), cell(t.Name), i.Opened, i.Streams,
				bytesCell(i.RSSBefore), bytesCell(i.RSSHeld), perStreamCell(i.BytesPerStream), errs)
		}
	}
	if header {
		w.WriteString("\n")
	}
}

func writePlotLinks(w *bufio.Writer, run *Run, plots map[int][]string) {
	for i, sc := range run.Scenarios {
		files := plots[i]
		if len(files) == 0 {
			continue
		}
		fmt.Fprintf(w, "## %s\n\n", sc.Name)
		if sc.Description != "" {
			fmt.Fprintf(w, "%s\n\n", sc.Description)
		}
		for _, f := range files {
			fmt.Fprintf(w, "![%s](%s)\n\n", f, f)
		}
	}
}

// FormatDuration prints d to three significant digits in µs, ms or s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + FormatDuration(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// cell makes s safe inside a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func addedCell(r *Row, direct string) string {
	switch {
	case !r.HasDirect:
		return "n/a"
	case r.Target == direct:
		return "—"
	case r.AddedP50 >= 0:
		return "+" + FormatDuration(r.AddedP50)
	}
	return FormatDuration(r.AddedP50)
}

func ratioCell(x float64) string {
	if x == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", x)
}

func cpuCell(us float64) string {
	if us == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", us)
}

func bytesCell(b uint64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func perStreamCell(b float64) string {
	if b < 10*1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f KiB", b/1024)
}

func errorsCell(errs, requests uint64) string {
	if errs == 0 || requests == 0 {
		return fmt.Sprint(errs)
	}
	return fmt.Sprintf("%d (%.2f%%)", errs, 100*float64(errs)/float64(requests))
}
