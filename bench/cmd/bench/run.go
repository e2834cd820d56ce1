package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelgate/gateway/bench/load"
	"github.com/modelgate/gateway/bench/report"
	"github.com/modelgate/gateway/bench/scenario"
)

// runBench deploys the processes, runs the scenarios and writes the results.
func runBench(ctx context.Context, o *options, log io.Writer) error {
	start := time.Now()
	scs, err := scenario.Select(scenario.All(o.params()), o.scenarios)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "bench", "results")
	}
	fmt.Fprintf(log, "bench %s mode: %d scenarios, %d rounds of %v per target, warm-up %v\n",
		o.mode(), len(scs), o.rounds, o.duration, o.warmup)
	d, err := deploy(ctx, o, root, log)
	if err != nil {
		return err
	}
	defer d.close(log)
	r := &runner{o: o, d: d, log: log, targets: d.targets(),
		env: scenario.Env{Keys: scenario.DefaultKeys, Direct: "http://" + d.simAddrs[0], TLS: d.cert.Client}}
	for _, a := range d.simAddrs[len(d.simAddrs)-2:] {
		r.env.Routed = append(r.env.Routed, "http://"+a)
	}
	run := &report.Run{
		Title:   "Benchmark: gateway vs nginx vs the simulator directly",
		Started: start,
		Notes:   r.notes(),
	}
	for i := range scs {
		if ctx.Err() != nil {
			break
		}
		run.Scenarios = append(run.Scenarios, r.scenario(ctx, &scs[i]))
		if err := d.checkAlive(); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; nothing written: %w", err)
	}
	run.Notes = append(run.Notes, fmt.Sprintf("The run took %v.", time.Since(start).Round(time.Second)))
	if err := writeResults(o.out, run, scs); err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s/README.md in %v\n", o.out, time.Since(start).Round(time.Second))
	return nil
}

// params sizes the scenarios by the flags.
func (o *options) params() scenario.Params {
	return scenario.Params{Duration: o.duration, Uploads: o.uploads, IdleHold: o.idleHold, OpenRate: o.openRate,
		PacedStreams: o.pacedStreams, PacedEvents: o.pacedEvents,
		PacedFirstEvent: o.pacedFirstEvent, PacedEventDelay: o.pacedEventDelay}
}

// runner runs the scenarios of one deployment.
type runner struct {
	o       *options
	d       *deployment
	env     scenario.Env
	targets []target
	log     io.Writer
}

// prepared is a target with its spec for the scenario at hand.
type prepared struct {
	t    *target
	spec *load.Spec
	res  *report.Target
}

// scenario measures sc against every target.
func (r *runner) scenario(ctx context.Context, sc *scenario.Scenario) report.Scenario {
	fmt.Fprintf(r.log, "== %s\n", sc.Name)
	if err := r.freshGateway(); err != nil {
		fmt.Fprintf(r.log, "   gateway  cannot restart: %v\n", err)
	}
	targets := r.targets
	if sc.Idle != nil {
		targets = r.idleTargets()
	}
	targets = slices.DeleteFunc(slices.Clone(targets), func(t target) bool { return !t.measures(sc) })
	out := report.Scenario{Name: sc.Name, Description: sc.Description, Targets: make([]report.Target, len(targets))}
	var ready []prepared
	for i := range targets {
		t := &targets[i]
		res := &out.Targets[i]
		res.Name = t.Name
		if res.Skipped = t.skipped; res.Skipped != "" {
			continue
		}
		spec, err := r.prepare(ctx, sc, t)
		if err != nil {
			res.Skipped = "cannot run: " + oneLine(err.Error(), 200)
			fmt.Fprintf(r.log, "   %-14s skipped: %v\n", t.Name, err)
			continue
		}
		ready = append(ready, prepared{t: t, spec: spec, res: res})
	}
	if sc.Idle != nil {
		r.idle(ctx, sc, ready)
		return out
	}
	if sc.Paced != nil {
		r.paced(ctx, sc, ready)
		return out
	}
	r.restore(ctx, sc)
	for _, p := range ready {
		r.warmUp(ctx, sc, p)
	}
	for round := range r.o.rounds {
		for k := range ready {
			// Each round starts with the next target, so none always runs first.
			p := ready[(k+round)%len(ready)]
			if ctx.Err() != nil {
				return out
			}
			r.round(ctx, sc, p, round)
		}
	}
	return out
}

// prepare builds the spec of sc for t and checks one request of it.
func (r *runner) prepare(ctx context.Context, sc *scenario.Scenario, t *target) (*load.Spec, error) {
	spec, err := sc.Prepare(ctx, &r.env, &t.Target)
	if err != nil {
		return nil, err
	}
	if err := scenario.Probe(ctx, spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// warmUp runs a short unmeasured load so connections and caches are warm.
func (r *runner) warmUp(ctx context.Context, sc *scenario.Scenario, p prepared) {
	o := sc.Load
	o.Duration = r.o.warmup
	if o.MaxRequests > 0 {
		o.MaxRequests = max(o.MaxRequests/8, 1)
	}
	if _, err := load.Run(ctx, p.spec, o); err != nil {
		fmt.Fprintf(r.log, "   %-14s warm-up: %v\n", p.t.Name, err)
	}
}

// round measures one round of p, sampling its processes.
func (r *runner) round(ctx context.Context, sc *scenario.Scenario, p prepared, round int) {
	if sc.Slow != nil && p.t.Name == "gateway" {
		// It would otherwise remember the deployment slowed in its last round.
		if err := r.d.restartGateway(); err != nil {
			fmt.Fprintf(r.log, "   %-14s round %d: cannot restart: %v\n", p.t.Name, round+1, err)
			return
		}
		p.t.pids = []int{r.d.gateway.pid()}
	}
	s, err := load.StartSampler(0, r.d.sampled(p.t)...)
	if err != nil {
		fmt.Fprintf(r.log, "   %-14s cannot sample: %v\n", p.t.Name, err)
	}
	o := sc.Load
	if sc.Slow != nil {
		o.ShiftAt = sc.Slow.At
		o.Shift = func() {
			if err := sc.Slow.SlowDown(ctx, &r.env, true); err != nil {
				fmt.Fprintf(r.log, "   %-14s round %d: %v\n", p.t.Name, round+1, err)
			}
		}
		defer r.restore(ctx, sc)
	}
	res, err := load.Run(ctx, p.spec, o)
	if err != nil {
		fmt.Fprintf(r.log, "   %-14s round %d: %v\n", p.t.Name, round+1, err)
		if s != nil {
			_, _ = s.Stop()
		}
		return
	}
	rd := report.Round{Result: res, Number: round + 1}
	if s != nil {
		if u, err := s.Stop(); err == nil {
			rd.Usage = &u
		}
	}
	p.res.Rounds = append(p.res.Rounds, rd)
	fmt.Fprintf(r.log, "   %-14s round %d: %s\n", p.t.Name, round+1, roundLine(&rd))
}

// restore undoes a scenario's slow-down: every round starts with the
// deployments as fast as each other.
func (r *runner) restore(ctx context.Context, sc *scenario.Scenario) {
	if sc.Slow == nil {
		return
	}
	if err := sc.Slow.SlowDown(ctx, &r.env, false); err != nil {
		fmt.Fprintf(r.log, "   cannot restore the slowed deployment: %v\n", err)
	}
}

func roundLine(rd *report.Round) string {
	res := &rd.Result
	line := fmt.Sprintf("%8.0f req/s  p50 %-8s p99 %-8s p99.9 %-8s", res.RPS,
		report.FormatDuration(res.Latency.P50), report.FormatDuration(res.Latency.P99), report.FormatDuration(res.Latency.P999))
	if u := rd.Usage; u != nil {
		line += fmt.Sprintf("  cpu %5.1f µs/req  rss %5.1f MiB", u.CPUPerRequest(res.Requests), float64(u.RSSPeak)/(1<<20))
	}
	for _, name := range slices.Sorted(maps.Keys(res.Groups)) {
		g := res.Groups[name]
		line += fmt.Sprintf("  %s %d calls p99 ttfb %s", name, g.OK, report.FormatDuration(g.TTFB.P99))
	}
	if n := res.ErrorCount(); n > 0 {
		line += fmt.Sprintf("  ERRORS %d of %d %v statuses %v", n, res.Requests, res.Errors, res.Statuses)
	}
	return line
}

// idleTargets are the targets of the idle scenario. A simulator notices a
// closed idle stream only at the stream's next frame (scenario.Linger), so
// the streams of one target stay open at the simulator while the next
// target is measured; direct holds its streams at the second simulator,
// which leaves the first, behind the proxies, room for theirs under the
// open-files limit. Both run the same binary with the same options.
func (r *runner) idleTargets() []target {
	ts := slices.Clone(r.targets)
	if len(r.d.sims) < 2 {
		return ts
	}
	for i := range ts {
		if ts[i].Kind == scenario.Direct {
			ts[i].URL, ts[i].pids = "http://"+r.d.simAddrs[1], []int{r.d.sims[1].pid()}
		}
	}
	return ts
}

// upstreamSim returns the pid of the simulator that t's streams end at.
func (r *runner) upstreamSim(t *target) int {
	if t.Kind == scenario.Direct {
		return t.pids[0]
	}
	return r.d.sims[0].pid()
}

// idle measures each target once holding idle streams. Before each, it
// waits until the simulator the streams end at has room for them.
func (r *runner) idle(ctx context.Context, sc *scenario.Scenario, ready []prepared) {
	for _, p := range ready {
		if ctx.Err() != nil {
			return
		}
		r.waitSimRoom(ctx, sc, r.upstreamSim(p.t))
		o := *sc.Idle
		o.PIDs = r.d.sampled(p.t)
		res, err := load.HoldIdle(ctx, p.spec, o)
		if err != nil {
			p.res.Skipped = "cannot hold the streams: " + oneLine(err.Error(), 200)
			fmt.Fprintf(r.log, "   %-14s %v\n", p.t.Name, err)
			continue
		}
		p.res.Idle = &res
		p.res.Skipped = "held idle streams: see the idle-stream table"
		fmt.Fprintf(r.log, "   %-14s %d of %d streams opened in %v; RSS %.1f → %.1f MiB: %.1f KiB per stream; errors %v\n",
			p.t.Name, res.Opened, res.Streams, res.OpenTime.Round(time.Millisecond),
			float64(res.RSSBefore)/(1<<20), float64(res.RSSHeld)/(1<<20), res.BytesPerStream/1024, res.Errors)
	}
}

// waitSimRoom waits, at most sc.Linger, until the simulator pid has room for
// sc's streams under its open-files limit.
func (r *runner) waitSimRoom(ctx context.Context, sc *scenario.Scenario, pid int) {
	deadline := time.Now().Add(sc.Linger)
	need := sc.Idle.Streams + 512
	limit := fileHardLimit()
	waited := false
	for {
		n, err := openFiles(pid)
		if err != nil || uint64(n+need) <= limit {
			if waited {
				fmt.Fprintf(r.log, "   (the simulator is down to %d open files)\n", n)
			}
			return
		}
		if !waited {
			fmt.Fprintf(r.log, "   (waiting for the simulator to notice %d closed streams, at most %v)\n", n, sc.Linger)
			waited = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(r.log, "   warning: the simulator still holds %d open files\n", n)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fileHardLimit returns this process's hard open-files limit, which the
// children inherit.
func fileHardLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return lim.Max
}

// oneLine shortens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// freshGateway restarts the gateways before a scenario, their stores kept,
// so that the memory a scenario measures is its own and not what the
// scenarios before it left in the process.
func (r *runner) freshGateway() error {
	if r.d.gateway != nil {
		if err := r.d.gateway.stop(); err != nil {
			return err
		}
	}
	if err := r.d.startGateway(); err != nil {
		return err
	}
	if r.d.redisGw != nil {
		if err := r.d.redisGw.stop(); err != nil {
			return err
		}
		if err := r.d.startRedisGateway(); err != nil {
			return err
		}
	}
	if r.d.blobsGw != nil {
		if err := r.d.blobsGw.stop(); err != nil {
			return err
		}
		if err := r.d.startBlobsGateway(); err != nil {
			return err
		}
	}
	if r.d.tracedGw != nil {
		if err := r.d.tracedGw.stop(); err != nil {
			return err
		}
		if err := r.d.startTracedGateway(); err != nil {
			return err
		}
	}
	r.targets = r.d.targets()
	return nil
}
