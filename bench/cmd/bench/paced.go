package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/modelgate/gateway/bench/load"
	"github.com/modelgate/gateway/bench/report"
	"github.com/modelgate/gateway/bench/scenario"
)

// pacedFloors are the floor relays measured on the paced-stream scenario
// besides floorScenarios: fasthttp's bare relay, the gateway's own floor.
var pacedFloors = []string{"fasthttp-relay"}

// pacedDescriptors is what a process keeps for other than the streams.
const pacedDescriptors = 1024

// pacedSizes returns sizes, each lowered to what the open-files hard limit
// allows (a proxy holds two descriptors per stream), without repeats, and
// the sizes it lowered.
func pacedSizes(sizes []int, limit uint64) (fit, lowered []int) {
	most := max(int(limit)-pacedDescriptors, 2) / 2
	for _, n := range sizes {
		if n > most {
			lowered = append(lowered, n)
			n = most
		}
		if !slices.Contains(fit, n) {
			fit = append(fit, n)
		}
	}
	return fit, lowered
}

// paced measures the targets of a paced-stream scenario at each size, in
// rounds in which the targets take turns at going first. A target whose
// first single stream does not carry every event stamped is skipped.
func (r *runner) paced(ctx context.Context, sc *scenario.Scenario, ready []prepared) {
	sizes, lowered := pacedSizes(sc.Paced.Sizes, fileHardLimit())
	if len(lowered) > 0 {
		fmt.Fprintf(r.log, "   (the open-files hard limit %d holds at most %d streams per proxy: %v lowered)\n",
			fileHardLimit(), sizes[len(sizes)-1], lowered)
	}
	ready = slices.DeleteFunc(ready, func(p prepared) bool { return !r.pacedProbe(ctx, sc, p) })
	// Each target's RSS before any of its streams: a process keeps most of
	// the memory a run took, so the next run's RSS before is no base.
	base := make([]uint64, len(ready))
	for i, p := range ready {
		if st, err := load.ReadProcs(r.d.sampled(p.t)...); err == nil {
			base[i] = st.RSS
		}
	}
	for _, size := range sizes {
		for round := range r.o.rounds {
			for k := range ready {
				if ctx.Err() != nil {
					return
				}
				i := (k + round) % len(ready)
				r.pacedRun(ctx, sc, ready[i], size, round, base[i])
			}
		}
	}
}

// pacedProbe runs one paced stream against p and reports whether it carried
// every event with its stamp.
func (r *runner) pacedProbe(ctx context.Context, sc *scenario.Scenario, p prepared) bool {
	o := sc.Paced.Options
	o.Streams = 1
	res, err := load.RunPaced(ctx, p.spec, o)
	if err == nil && res.Completed != 1 {
		err = fmt.Errorf("a single stream failed: errors %v, statuses %v, %d events", res.Errors, res.Statuses, res.Events)
	}
	if err != nil {
		p.res.Skipped = "cannot run: " + oneLine(err.Error(), 200)
		fmt.Fprintf(r.log, "   %-14s skipped: %v\n", p.t.Name, err)
		return false
	}
	p.res.Skipped = "paced streams: see the paced-stream table"
	return true
}

// pacedRun measures one round of p at size streams; baseline is p's RSS
// before its first streams.
func (r *runner) pacedRun(ctx context.Context, sc *scenario.Scenario, p prepared, size, round int, baseline uint64) {
	o := sc.Paced.Options
	o.Streams, o.PIDs, o.RSSBaseline = size, r.d.sampled(p.t), baseline
	res, err := load.RunPaced(ctx, p.spec, o)
	if err != nil {
		fmt.Fprintf(r.log, "   %-14s %5d streams, round %d: %v\n", p.t.Name, size, round+1, err)
		return
	}
	p.res.Paced = append(p.res.Paced, res)
	fmt.Fprintf(r.log, "   %-14s %5d streams, round %d: %s\n", p.t.Name, size, round+1, pacedLine(&res))
}

func pacedLine(res *load.PacedResult) string {
	line := fmt.Sprintf("%5d open at most, %6.1f KiB/stream, %5.1f µs CPU/event, delay p50 %-8s p99 %-8s p99.9 %-8s first event +%-8s in %v",
		res.MaxOpen, res.BytesPerStream()/1024, res.CPUPerEvent(),
		report.FormatDuration(res.Delay.P50), report.FormatDuration(res.Delay.P99), report.FormatDuration(res.Delay.P999),
		report.FormatDuration(res.FirstEventAdded.P50), res.Elapsed.Round(time.Millisecond))
	if n := res.ErrorCount(); n > 0 {
		line += fmt.Sprintf("  FAILED %d of %d %v statuses %v", n, res.Streams, res.Errors, res.Statuses)
	}
	return line
}
