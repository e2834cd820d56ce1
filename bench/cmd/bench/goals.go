package main

import (
	"bytes"
	"fmt"

	"github.com/modelgate/gateway/bench/report"
	"github.com/modelgate/gateway/bench/scenario"
)

// The limits of issue 6 on this machine.
const (
	maxPeakRSS        = 64 << 20
	maxBytesPerIdle   = 32 << 10
	gatewayTarget     = "gateway"
	referenceTarget   = "nginx"
	notMeasured       = "not measured"
	goalMet, goalMiss = "met", "**missed**"
)

// goal is one target of the issue, judged on one run.
type goal struct {
	what, measured, verdict string
}

// rowIndex finds the measured table rows of a run by scenario and target.
type rowIndex map[[2]string]*report.Row

func indexRows(run *report.Run) rowIndex {
	idx := make(rowIndex)
	rows := report.Rows(run)
	for i := range rows {
		if rows[i].Skipped == "" {
			idx[[2]string{rows[i].Scenario, rows[i].Target}] = &rows[i]
		}
	}
	return idx
}

func (idx rowIndex) get(sc, target string) *report.Row { return idx[[2]string{sc, target}] }

// goals judges the run against the targets, as ratios within the run.
func goals(run *report.Run, scs []scenario.Scenario) []goal {
	idx := indexRows(run)
	return []goal{
		throughputGoal(idx, "chat", "Chat plain, 64 connections: gateway req/s ≥ nginx's"),
		throughputGoal(idx, "chat-stream", "Chat stream, 20 events, 64 connections: gateway req/s ≥ nginx's"),
		throughputGoal(idx, "chat-tls", "Chat over TLS, kept alive, 64 connections: gateway req/s ≥ nginx's"),
		throughputGoal(idx, "chat-tls-handshake", "Chat with a full TLS handshake per call, 64 connections: gateway req/s ≥ nginx's"),
		addedLatencyGoal(idx),
		peakRSSGoal(idx, scs),
		idleGoal(run),
	}
}

func throughputGoal(idx rowIndex, sc, what string) goal {
	g, n := idx.get(sc, gatewayTarget), idx.get(sc, referenceTarget)
	if g == nil || n == nil {
		return goal{what, notMeasured, notMeasured}
	}
	return goal{what, fmt.Sprintf("gateway %.0f req/s, nginx %.0f req/s: ×%.2f", g.RPS, n.RPS, g.VsReference),
		verdict(g.RPS >= n.RPS)}
}

func addedLatencyGoal(idx rowIndex) goal {
	const what = "One connection (chat-1conn): gateway's added p50 ≤ nginx's"
	g, n := idx.get("chat-1conn", gatewayTarget), idx.get("chat-1conn", referenceTarget)
	if g == nil || n == nil || !g.HasDirect || !n.HasDirect {
		return goal{what, notMeasured, notMeasured}
	}
	return goal{what, fmt.Sprintf("gateway +%s, nginx +%s over direct's p50",
		report.FormatDuration(g.AddedP50), report.FormatDuration(n.AddedP50)), verdict(g.AddedP50 <= n.AddedP50)}
}

// peakRSSGoal judges the gateway's peak RSS under the chat load of 64
// connections, the load the goal names, and shows the most RSS of the other
// 64-connection scenarios beside it: those with Responses also hold the
// store's memtables and block cache.
func peakRSSGoal(idx rowIndex, scs []scenario.Scenario) goal {
	const what = "Gateway peak RSS under the 64-connection chat load ≤ 64 MiB"
	chat := idx.get("chat", gatewayTarget)
	if chat == nil || chat.PeakRSS == 0 {
		return goal{what, notMeasured, notMeasured}
	}
	measured := fmt.Sprintf("chat %.1f MiB", float64(chat.PeakRSS)/(1<<20))
	var peak uint64
	where := ""
	for i := range scs {
		sc := &scs[i]
		if sc.Name == "chat" || sc.Idle != nil || sc.Load.Rate > 0 || sc.Load.Connections != scenario.Connections {
			continue
		}
		if g := idx.get(sc.Name, gatewayTarget); g != nil && g.PeakRSS > peak {
			peak, where = g.PeakRSS, sc.Name
		}
	}
	if peak > 0 {
		measured += fmt.Sprintf("; the other 64-connection scenarios %.1f MiB at most (%s)", float64(peak)/(1<<20), where)
	}
	return goal{what, measured, verdict(chat.PeakRSS <= maxPeakRSS)}
}

func idleGoal(run *report.Run) goal {
	const what = "Gateway memory per idle SSE stream ≤ 32 KiB"
	for _, sc := range run.Scenarios {
		for _, t := range sc.Targets {
			if t.Name != gatewayTarget || t.Idle == nil || t.Idle.Opened == 0 {
				continue
			}
			i := t.Idle
			return goal{what, fmt.Sprintf("%.1f KiB over %d streams held", i.BytesPerStream/1024, i.Opened),
				verdict(i.BytesPerStream <= maxBytesPerIdle && i.Opened == i.Streams)}
		}
	}
	return goal{what, notMeasured, notMeasured}
}

func verdict(ok bool) string {
	if ok {
		return goalMet
	}
	return goalMiss
}

// writeGoals writes the goals as a markdown table.
func writeGoals(b *bytes.Buffer, run *report.Run, scs []scenario.Scenario) {
	b.WriteString("## Goals of issue 6 (ratios within this run)\n\n| goal | measured | verdict |\n|---|---|---|\n")
	for _, g := range goals(run, scs) {
		fmt.Fprintf(b, "| %s | %s | %s |\n", g.what, g.measured, g.verdict)
	}
	b.WriteString("\n")
}
