package report

import (
	"bufio"
	"fmt"
	"slices"

	"github.com/modelgate/gateway/bench/load"
)

// GroupRow is one answer header value (a deployment) of one target of a
// scenario whose calls were grouped, over all rounds, from each round's
// shift on.
type GroupRow struct {
	Scenario, Target, Group string
	OK                      uint64
	// Share is OK over all the target's grouped calls.
	Share float64
	TTFB  load.Summary
	// AllTTFB is the TTFB of all the target's grouped calls.
	AllTTFB load.Summary
}

// GroupRows returns the grouped calls of run, by scenario, target and group.
func GroupRows(run *Run) []GroupRow {
	var rows []GroupRow
	for _, sc := range run.Scenarios {
		for _, t := range sc.Targets {
			var rs []load.Result
			for _, rd := range t.Rounds {
				if rd.Result.Groups != nil {
					rs = append(rs, rd.Result)
				}
			}
			if len(rs) == 0 {
				continue
			}
			m := load.Merge(rs...)
			all := load.NewHistogram()
			var total uint64
			names := make([]string, 0, len(m.Groups))
			for name, g := range m.Groups {
				names = append(names, name)
				total += g.OK
				all.Merge(g.TTFBHist)
			}
			slices.Sort(names)
			for _, name := range names {
				g := m.Groups[name]
				rows = append(rows, GroupRow{Scenario: sc.Name, Target: t.Name, Group: name, OK: g.OK,
					Share: float64(g.OK) / float64(total), TTFB: g.TTFB, AllTTFB: all.Summary()})
			}
		}
	}
	return rows
}

func writeGroupTable(w *bufio.Writer, run *Run) {
	rows := GroupRows(run)
	if len(rows) == 0 {
		return
	}
	w.WriteString("Calls by the deployment that answered them (its x-sim-deployment header), counted from the slow-down on:\n\n")
	w.WriteString("| scenario | target | deployment | calls | share | p50 first byte | p99 first byte | p99 first byte, all calls |\n")
	w.WriteString("|---|---|---|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.2f %% | %s | %s | %s |\n", cell(r.Scenario), cell(r.Target), cell(r.Group),
			r.OK, 100*r.Share, FormatDuration(r.TTFB.P50), FormatDuration(r.TTFB.P99), FormatDuration(r.AllTTFB.P99))
	}
	w.WriteString("\n")
}
