// Package report turns the measurements of a benchmark run into what people
// read and what later runs compare against: a markdown table per run,
// latency-percentile and throughput plots per scenario of requests, memory,
// CPU and event-delay plots against the streams per scenario of paced
// streams, and a JSON dump of every raw result (histograms included).
//
// It owns presenting, not measuring: the numbers come from bench/load. Each
// scenario is measured against the upstream simulator directly (the floor),
// the gateway and a reference proxy (nginx); the table quotes the others as
// added latency and throughput ratios against those two.
package report

import (
	"slices"
	"time"

	"github.com/modelgate/gateway/bench/load"
)

// Default target names of Run.Direct and Run.Reference.
const (
	DefaultDirect    = "direct"
	DefaultReference = "nginx"
)

// Run is everything one benchmark run measured.
type Run struct {
	Title   string    `json:"title"`
	Started time.Time `json:"started"`
	// Notes describe the machine and settings: cores, GOMAXPROCS, nginx workers.
	Notes []string `json:"notes,omitempty"`
	// Direct names the floor target of every scenario; "" means DefaultDirect.
	Direct string `json:"direct,omitempty"`
	// Reference names the reference proxy; "" means DefaultReference.
	Reference string     `json:"reference,omitempty"`
	Scenarios []Scenario `json:"scenarios"`
}

// Scenario is one workload measured against several targets.
type Scenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Targets     []Target `json:"targets"`
}

// Target is one target of a scenario: its rounds, alternated with the other
// targets' rounds in the same run, or why it was skipped.
type Target struct {
	Name string `json:"name"`
	// Skipped, when set, says why the target was not measured, e.g.
	// "nginx not available: ...".
	Skipped string  `json:"skipped,omitempty"`
	Rounds  []Round `json:"rounds,omitempty"`
	// Idle is the idle-stream memory measurement, if the scenario made one.
	Idle *load.IdleResult `json:"idle,omitempty"`
	// Paced are the paced-stream runs, every size of every round, if the
	// scenario made them.
	Paced []load.PacedResult `json:"paced,omitempty"`
}

// Round is one measured round of one target.
type Round struct {
	Result load.Result `json:"result"`
	// Usage is what the target's processes consumed during the round, if sampled.
	Usage *load.Usage `json:"usage,omitempty"`
	// Number is the round's place in the scenario, from 1: the rounds of
	// the targets with the same number ran in turn. 0 in results written
	// before it was kept.
	Number int `json:"number,omitempty"`
}

func (r *Run) direct() string {
	if r.Direct == "" {
		return DefaultDirect
	}
	return r.Direct
}

func (r *Run) reference() string {
	if r.Reference == "" {
		return DefaultReference
	}
	return r.Reference
}

// Row is one line of the table: one target of one scenario, over all its rounds.
type Row struct {
	Scenario string
	Target   string
	Skipped  string
	Rounds   int
	// RPS is the median of the rounds' req/s, robust to one noisy round.
	RPS float64
	// Latency summarises all rounds' latencies together.
	Latency load.Summary
	// AddedP50 is Latency.P50 minus the direct target's; valid if HasDirect.
	AddedP50  time.Duration
	HasDirect bool
	// VsDirect and VsReference are RPS over theirs; 0 when unknown.
	VsDirect, VsReference float64
	// CPUPerRequest is the target processes' CPU µs per request; 0 if not sampled.
	CPUPerRequest float64
	// PeakRSS is the most RSS seen in any round, bytes; 0 if not sampled.
	PeakRSS  uint64
	Requests uint64
	Errors   uint64
	// Merged is all rounds merged, for plots.
	Merged load.Result
}

// Rows computes the table rows of run, scenario by scenario, targets in order.
func Rows(run *Run) []Row {
	var rows []Row
	for i := range run.Scenarios {
		rows = append(rows, scenarioRows(run, &run.Scenarios[i])...)
	}
	return rows
}

func scenarioRows(run *Run, sc *Scenario) []Row {
	rows := make([]Row, len(sc.Targets))
	for i := range sc.Targets {
		rows[i] = targetRow(sc.Name, &sc.Targets[i])
	}
	direct := findRow(rows, run.direct())
	ref := findRow(rows, run.reference())
	for i := range rows {
		r := &rows[i]
		if r.Skipped != "" {
			continue
		}
		if direct != nil {
			r.HasDirect = true
			r.AddedP50 = r.Latency.P50 - direct.Latency.P50
			r.VsDirect = ratio(r.RPS, direct.RPS)
		}
		if ref != nil {
			r.VsReference = ratio(r.RPS, ref.RPS)
		}
	}
	return rows
}

// findRow returns the measured row of target name, or nil.
func findRow(rows []Row, name string) *Row {
	for i := range rows {
		if rows[i].Target == name && rows[i].Skipped == "" && rows[i].Rounds > 0 {
			return &rows[i]
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func targetRow(scenario string, t *Target) Row {
	row := Row{Scenario: scenario, Target: t.Name, Skipped: t.Skipped, Rounds: len(t.Rounds)}
	if t.Skipped != "" {
		return row
	}
	if len(t.Rounds) == 0 {
		row.Skipped = "no rounds measured"
		return row
	}
	results := make([]load.Result, len(t.Rounds))
	rps := make([]float64, len(t.Rounds))
	var cpu time.Duration
	var sampled uint64
	for i, rd := range t.Rounds {
		results[i], rps[i] = rd.Result, rd.Result.RPS
		if rd.Usage != nil {
			cpu += rd.Usage.CPU
			sampled += rd.Result.Requests
			row.PeakRSS = max(row.PeakRSS, rd.Usage.RSSPeak)
		}
	}
	row.Merged = load.Merge(results...)
	row.RPS = median(rps)
	row.Latency = row.Merged.Latency
	row.Requests = row.Merged.Requests
	row.Errors = row.Merged.ErrorCount()
	if sampled > 0 {
		u := load.Usage{CPU: cpu}
		row.CPUPerRequest = u.CPUPerRequest(sampled)
	}
	return row
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
