package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelgate/gateway/bench/report"
)

// The limits of issue 41: the short calls against fasthttp's own relay, the
// paced streams against nginx, both in the same run.
const (
	relayTarget      = "fasthttp-relay"
	pacedScenario    = "llm-streams"
	chatMinRatio     = 0.97
	streamMinRatio   = 1.0
	maxCPUAboveRelay = 2.0  // µs per call
	pacedCPUStreams  = 1000 // where the machine is not saturated
	noRelay          = notMeasured + ": no relay target"
)

// goals41 judges the run against issue 41's targets.
func goals41(run *report.Run) []goal {
	idx := indexRows(run)
	paced := pacedGoalRows(run)
	return []goal{
		rateVsRelayGoal(run, idx, "chat", chatMinRatio),
		cpuVsRelayGoal(run, idx, "chat"),
		rateVsRelayGoal(run, idx, "chat-stream", streamMinRatio),
		rateVsRelayGoal(run, idx, "messages-stream", streamMinRatio),
		pacedRSSGoal(paced),
		pacedCPUGoal(paced),
		pacedDelayGoal(paced),
		pacedFailedGoal(run, paced),
	}
}

// findTarget returns the target name of scenario sc in run, or nil.
func findTarget(run *report.Run, sc, name string) *report.Target {
	for i := range run.Scenarios {
		s := &run.Scenarios[i]
		if s.Name != sc {
			continue
		}
		for j := range s.Targets {
			if s.Targets[j].Name == name {
				return &s.Targets[j]
			}
		}
	}
	return nil
}

// roundPair is the gateway's and the relay's round of the same number.
type roundPair struct {
	number    int
	gw, relay *report.Round
}

// pairRounds pairs the rounds of a and b that ran in turn: by their
// numbers, or by their order in results that kept no numbers, when both
// have as many rounds. A round that failed has no partner.
func pairRounds(a, b *report.Target) []roundPair {
	numbered := func(t *report.Target) bool {
		return !slices.ContainsFunc(t.Rounds, func(r report.Round) bool { return r.Number == 0 })
	}
	var pairs []roundPair
	if numbered(a) && numbered(b) {
		for i := range a.Rounds {
			if j := slices.IndexFunc(b.Rounds, func(r report.Round) bool { return r.Number == a.Rounds[i].Number }); j >= 0 {
				pairs = append(pairs, roundPair{a.Rounds[i].Number, &a.Rounds[i], &b.Rounds[j]})
			}
		}
		return pairs
	}
	if len(a.Rounds) != len(b.Rounds) {
		return nil
	}
	for i := range a.Rounds {
		pairs = append(pairs, roundPair{i + 1, &a.Rounds[i], &b.Rounds[i]})
	}
	return pairs
}

// vsRelay finds the gateway's and the relay's rows on sc and pairs their
// rounds; why, when not "", is the verdict of a goal it cannot judge.
func vsRelay(run *report.Run, idx rowIndex, sc string) (g, rl *report.Row, pairs []roundPair, why string) {
	g, rl = idx.get(sc, gatewayTarget), idx.get(sc, relayTarget)
	switch {
	case findTarget(run, sc, gatewayTarget) == nil:
		return nil, nil, nil, notMeasured + ": " + sc + " not run"
	case rl == nil:
		return nil, nil, nil, noRelay
	case g == nil:
		return nil, nil, nil, notMeasured + ": gateway skipped"
	}
	return g, rl, pairRounds(findTarget(run, sc, gatewayTarget), findTarget(run, sc, relayTarget)), ""
}

// rateVsRelayGoal judges the gateway's rate on sc against the relay's, on
// the median of the rounds' ratios: each round's gateway req/s over the
// relay's in the same round, which the machine's drift moves less than
// the ratio of the run's figures, shown beside.
func rateVsRelayGoal(run *report.Run, idx rowIndex, sc string, least float64) goal {
	what := fmt.Sprintf("%s: gateway req/s ≥ %.2f × %s's (median of the rounds' ratios)", sc, least, relayTarget)
	g, rl, pairs, why := vsRelay(run, idx, sc)
	if why != "" {
		return goal{what, "—", why}
	}
	if len(pairs) == 0 {
		return goal{what, "—", notMeasured + ": no rounds of both"}
	}
	ratios := make([]float64, len(pairs))
	cells := make([]string, len(pairs))
	for i, p := range pairs {
		ratios[i] = ratioOf(p.gw.Result.RPS, p.relay.Result.RPS)
		cells[i] = fmt.Sprintf("%d: ×%.2f", p.number, ratios[i])
	}
	med := medianOf(ratios)
	measured := fmt.Sprintf("rounds %s; median ×%.2f; run ×%.2f (gateway %.0f req/s, %s %.0f)",
		strings.Join(cells, ", "), med, ratioOf(g.RPS, rl.RPS), g.RPS, relayTarget, rl.RPS)
	return goal{what, measured, verdict(med >= least)}
}

// cpuVsRelayGoal judges the gateway's CPU per call on sc over the relay's
// on the median of the rounds' differences, as the rate goals do: a round in
// which the machine's host took cycles from the VM inflates whichever target
// ran then (nginx's as well). Without rounds of both sampled it falls back on
// the run's figures (each target's CPU over all its sampled rounds' calls).
func cpuVsRelayGoal(run *report.Run, idx rowIndex, sc string) goal {
	what := fmt.Sprintf("%s: gateway CPU µs/req ≤ %s's + %.0f µs (median of the rounds' differences)",
		sc, relayTarget, maxCPUAboveRelay)
	g, rl, pairs, why := vsRelay(run, idx, sc)
	if why != "" {
		return goal{what, "—", why}
	}
	if g.CPUPerRequest == 0 || rl.CPUPerRequest == 0 {
		return goal{what, "—", notMeasured + ": CPU not sampled"}
	}
	above := g.CPUPerRequest - rl.CPUPerRequest
	runCell := fmt.Sprintf("run %+.1f µs (gateway %.1f, %s %.1f)", above, g.CPUPerRequest, relayTarget, rl.CPUPerRequest)
	var diffs []float64
	var cells []string
	for _, p := range pairs {
		if p.gw.Usage != nil && p.relay.Usage != nil {
			d := p.gw.Usage.CPUPerRequest(p.gw.Result.Requests) - p.relay.Usage.CPUPerRequest(p.relay.Result.Requests)
			diffs = append(diffs, d)
			cells = append(cells, fmt.Sprintf("%d: %+.1f", p.number, d))
		}
	}
	if len(diffs) == 0 {
		return goal{what, runCell, verdict(above <= maxCPUAboveRelay)}
	}
	med := medianOf(diffs)
	measured := fmt.Sprintf("rounds %s; median %+.1f µs; %s", strings.Join(cells, ", "), med, runCell)
	return goal{what, measured, verdict(med <= maxCPUAboveRelay)}
}

func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func medianOf(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeGoals41 writes issue 41's goals as a markdown table.
func writeGoals41(b *bytes.Buffer, run *report.Run) {
	b.WriteString("## Goals of issue 41 (ratios within this run)\n\n")
	b.WriteString(goals41Intro)
	b.WriteString("| goal | measured | verdict |\n|---|---|---|\n")
	for _, g := range goals41(run) {
		fmt.Fprintf(b, "| %s | %s | %s |\n", g.what, tableCell.Replace(g.measured), tableCell.Replace(g.verdict))
	}
	b.WriteString("\n")
}

// tableCell makes a skipped target's reason safe inside a table cell.
var tableCell = strings.NewReplacer("|", `\|`, "\n", " ")

const goals41Intro = "Short calls against " + relayTarget + ", fasthttp's own relay, in the same rounds: a rate goal " +
	"is judged on the median of the rounds' ratios (round by round, the gateway's req/s over the relay's in that round, " +
	"the targets taking turns), the run's ratio (the table's req/s, each the median of its rounds) shown beside; " +
	"the CPU goal likewise on the median of the rounds' differences of CPU µs/req, the run's beside. Paced streams (" + pacedScenario + ") " +
	"against nginx, from the paced-stream table.\n\n"

// pacedRows are the gateway's and the reference's rows of the paced-stream
// table, by size.
type pacedRows struct {
	// why says why there are none of the gateway's, e.g. the scenario was
	// not run; "" when there are.
	why    string
	ref    string
	sizes  []int // the gateway's, ascending
	gw, vs map[int]*report.PacedRow
}

func pacedGoalRows(run *report.Run) pacedRows {
	p := pacedRows{ref: run.Reference, gw: map[int]*report.PacedRow{}, vs: map[int]*report.PacedRow{}}
	if p.ref == "" {
		p.ref = report.DefaultReference
	}
	rows := report.PacedRows(run)
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Scenario != pacedScenario:
		case r.Target == gatewayTarget:
			p.gw[r.Streams] = r
			p.sizes = append(p.sizes, r.Streams)
		case r.Target == p.ref:
			p.vs[r.Streams] = r
		}
	}
	slices.Sort(p.sizes)
	if len(p.sizes) == 0 {
		p.why = notMeasured + ": " + pacedScenario + " not run"
		if t := findTarget(run, pacedScenario, gatewayTarget); t != nil {
			p.why = notMeasured + ": no gateway streams"
			if t.Skipped != "" {
				p.why = notMeasured + ": gateway " + t.Skipped
			}
		}
	}
	return p
}

// pacedVsRef judges the gateway against the reference at each size by the
// figure of a row; show prints one.
func pacedVsRef(p pacedRows, what string, sizes []int, figure func(*report.PacedRow) float64, show func(float64) string) goal {
	if p.why != "" {
		return goal{what, "—", p.why}
	}
	var cells []string
	met, missed := 0, 0
	for _, n := range sizes {
		g, ref := figure(p.gw[n]), p.vs[n]
		if ref == nil {
			cells = append(cells, fmt.Sprintf("%d streams: gateway %s, %s not measured", n, show(g), p.ref))
			continue
		}
		r := figure(ref)
		cells = append(cells, fmt.Sprintf("%d streams: gateway %s, %s %s (×%.2f)", n, show(g), p.ref, show(r), ratioOf(g, r)))
		if g <= r {
			met++
		} else {
			missed++
		}
	}
	v := verdict(missed == 0)
	if missed == 0 && met < len(sizes) {
		v = notMeasured + ": no " + p.ref + " at every size"
	}
	return goal{what, strings.Join(cells, "; "), v}
}

func pacedRSSGoal(p pacedRows) goal {
	what := fmt.Sprintf("%s: gateway RSS per stream ≤ %s's, at each size", pacedScenario, p.ref)
	return pacedVsRef(p, what, p.sizes, func(r *report.PacedRow) float64 { return r.BytesPerStream },
		func(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) })
}

func pacedDelayGoal(p pacedRows) goal {
	what := fmt.Sprintf("%s: gateway p99 event delay ≤ %s's, at each size", pacedScenario, p.ref)
	return pacedVsRef(p, what, p.sizes, func(r *report.PacedRow) float64 { return float64(r.Delay.P99) },
		func(d float64) string { return report.FormatDuration(time.Duration(d)) })
}

// pacedCPUGoal judges the CPU per event at 1,000 streams, where the machine
// is not saturated, or at the smallest size run, which it names.
func pacedCPUGoal(p pacedRows) goal {
	what := fmt.Sprintf("%s: gateway CPU per event ≤ %s's at %d streams", pacedScenario, p.ref, pacedCPUStreams)
	var at []int
	switch {
	case p.why != "":
	case slices.Contains(p.sizes, pacedCPUStreams):
		at = []int{pacedCPUStreams}
	default:
		at = p.sizes[:1]
		what = fmt.Sprintf("%s: gateway CPU per event ≤ %s's at %d streams (the smallest size run; the goal names %d)",
			pacedScenario, p.ref, at[0], pacedCPUStreams)
	}
	return pacedVsRef(p, what, at, func(r *report.PacedRow) float64 { return r.CPUPerEvent },
		func(us float64) string { return fmt.Sprintf("%.1f µs", us) })
}

// pacedFailedGoal judges the gateway's failed streams at every size, the
// reference's shown beside. A gateway that could not carry one stream
// misses it.
func pacedFailedGoal(run *report.Run, p pacedRows) goal {
	what := pacedScenario + ": 0 failed gateway streams at every size"
	if p.why != "" {
		t := findTarget(run, pacedScenario, gatewayTarget)
		if t != nil && strings.HasPrefix(t.Skipped, "cannot run") {
			return goal{what, "gateway " + t.Skipped, goalMiss}
		}
		return goal{what, "—", p.why}
	}
	var cells []string
	var failed uint64
	for _, n := range p.sizes {
		g := p.gw[n]
		failed += g.Failed
		cell := fmt.Sprintf("%d streams: gateway %d of %d", n, g.Failed, g.Total)
		if ref := p.vs[n]; ref != nil {
			cell += fmt.Sprintf(", %s %d of %d", p.ref, ref.Failed, ref.Total)
		}
		cells = append(cells, cell)
	}
	return goal{what, strings.Join(cells, "; "), verdict(failed == 0)}
}
