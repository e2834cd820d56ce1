package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/load"
	"github.com/modelgate/gateway/bench/report"
	"github.com/modelgate/gateway/bench/scenario"
)

func TestParseFlags(t *testing.T) {
	f := func(args []string, rounds int, d time.Duration, uploads uint64) {
		t.Helper()
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if o.rounds != rounds || o.duration != d || o.uploads != uploads {
			t.Fatalf("%v: rounds %d duration %v uploads %d", args, o.rounds, o.duration, o.uploads)
		}
	}
	f(nil, 3, 5*time.Second, 64)
	f([]string{"-quick"}, 2, time.Second, 16)
	f([]string{"-quick", "-rounds", "4", "-duration", "3s"}, 4, 3*time.Second, 16)
	for _, c := range []struct {
		args     []string
		noFloors bool
	}{{nil, false}, {[]string{"-no-floors"}, true}, {[]string{"-quick"}, true}} {
		if o, err := parseFlags(c.args, io.Discard); err != nil || o.noFloors != c.noFloors {
			t.Fatalf("%v: no floors %v, %v", c.args, o.noFloors, err)
		}
	}
	for _, bad := range [][]string{{"-rounds", "-1"}, {"-duration", "1ms"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

// measured returns a target with one round of rps and p50, and a peak RSS.
func measured(name string, rps float64, p50 time.Duration, rss uint64) report.Target {
	h := load.NewHistogram()
	for range 100 {
		h.Record(p50)
	}
	res := load.Merge(load.Result{OK: uint64(rps), Requests: uint64(rps), Elapsed: time.Second, LatencyHist: h, TTFBHist: load.NewHistogram()})
	return report.Target{Name: name, Rounds: []report.Round{{Result: res, Usage: &load.Usage{RSSPeak: rss}}}}
}

func TestGoals(t *testing.T) {
	scs := scenario.All(scenario.Params{})
	run := &report.Run{Scenarios: []report.Scenario{
		{Name: "chat", Targets: []report.Target{
			measured("direct", 300, time.Millisecond, 10<<20),
			measured("gateway", 200, 2*time.Millisecond, 70<<20),
			measured("nginx", 100, 3*time.Millisecond, 10<<20)}},
		{Name: "chat-1conn", Targets: []report.Target{
			measured("direct", 300, 100*time.Microsecond, 10<<20),
			measured("gateway", 200, 200*time.Microsecond, 20<<20),
			measured("nginx", 100, 150*time.Microsecond, 10<<20)}},
		{Name: "affinity", Targets: []report.Target{measured("gateway", 200, time.Millisecond, 80<<20)}},
		{Name: "idle-sse", Targets: []report.Target{
			{Name: "gateway", Idle: &load.IdleResult{Streams: 10, Opened: 10, BytesPerStream: 20 << 10}}}},
	}}
	got := map[string]goal{}
	for _, g := range goals(run, scs) {
		got[strings.Fields(g.what)[1]] = g
	}
	f := func(key, verdict, measured string) {
		t.Helper()
		g := got[key]
		if g.verdict != verdict || !strings.Contains(g.measured, measured) {
			t.Fatalf("goal %q: %q %q, want %q containing %q", g.what, g.verdict, g.measured, verdict, measured)
		}
	}
	f("plain,", goalMet, "×2.00")               // chat: 200 vs 100 req/s
	f("stream,", notMeasured, notMeasured)      // chat-stream absent
	f("connection", goalMiss, "gateway +100µs") // +100µs against nginx's +50µs
	f("peak", goalMiss, "chat 70.0 MiB; the other 64-connection scenarios 80.0 MiB at most (affinity)")
	f("memory", goalMet, "20.0 KiB over 10 streams")

	// The goal names the chat load: others, such as those holding the
	// Responses store, are shown beside it, not judged.
	run.Scenarios[0].Targets[1] = measured("gateway", 200, 2*time.Millisecond, 30<<20)
	got = map[string]goal{}
	for _, g := range goals(run, scs) {
		got[strings.Fields(g.what)[1]] = g
	}
	f("peak", goalMet, "chat 30.0 MiB; the other 64-connection scenarios 80.0 MiB at most (affinity)")
}

func TestWriteResults(t *testing.T) {
	dir := t.TempDir()
	for _, stale := range []string{"07-gone-latency.png", "08-gone-delay.png"} {
		if err := os.WriteFile(filepath.Join(dir, stale), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := &report.Run{Title: "T", Notes: []string{"a note"}, Scenarios: []report.Scenario{
		{Name: "chat", Description: "the chat", Targets: []report.Target{
			measured("direct", 300, time.Millisecond, 0), measured("gateway", 200, 2*time.Millisecond, 0),
			{Name: "nginx", Skipped: "nginx not available: test"}}},
	}}
	if err := writeResults(dir, run, scenario.All(scenario.Params{})); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, readmeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# T", "- a note", "| chat | gateway | 200 |", "skipped: nginx not available: test",
		"## Goals of issue 6", "## Goals of issue 41", "| chat: gateway req/s ≥ 0.97 × fasthttp-relay's (median of the rounds' ratios) | — | not measured: no relay target |", "## How to run", "## Plots\n\n### chat\n\nthe chat", "(01-chat-latency.png)"} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Fatalf("README lacks %q:\n%s", want, readme)
		}
	}
	for name, want := range map[string]bool{"07-gone-latency.png": false, "08-gone-delay.png": false, report.MarkdownFile: false,
		report.JSONFile: true, "01-chat-latency.png": true, "01-chat-throughput.png": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Fatalf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
}

// The floor relays are measured on the chat scenarios and messages-stream alone, the gateway
// on the redis engine on the stateful ones alone, the rest everywhere.
func TestTargetMeasures(t *testing.T) {
	scs := scenario.All(scenario.Params{})
	p := &proc{cmd: &exec.Cmd{Process: &os.Process{Pid: 1}}}
	d := &deployment{floors: []floor{{name: "go-relay", p: p}, {name: "fasthttp-relay", p: p}},
		simAddrs: []string{"a"}, sims: []*proc{p}, gateway: p, redisSkipped: "test", nginxSkipped: "test"}
	measured := make(map[string][]string)
	for _, tg := range d.targets() {
		for i := range scs {
			if tg.measures(&scs[i]) {
				measured[tg.Name] = append(measured[tg.Name], scs[i].Name)
			}
		}
	}
	for name, want := range map[string]string{"go-relay": "chat,chat-1conn,chat-stream,messages-stream",
		"fasthttp-relay": "chat,chat-1conn,chat-stream,messages-stream,llm-streams"} {
		if got := strings.Join(measured[name], ","); got != want {
			t.Fatalf("%s measured on %s, want %s", name, got, want)
		}
	}
	if !slices.Contains(measured["nginx"], "llm-streams") || !slices.Contains(measured["direct"], "llm-streams") {
		t.Fatalf("llm-streams not measured on nginx (%v) or direct (%v)", measured["nginx"], measured["direct"])
	}
	storeOnly := 0
	for i := range scs {
		if scs[i].StoreOnly {
			storeOnly++
			if slices.Contains(measured["nginx"], scs[i].Name) || slices.Contains(measured["direct"], scs[i].Name) {
				t.Fatalf("%s measured on nginx or direct", scs[i].Name)
			}
		}
	}
	if len(measured["gateway"]) != len(scs) || len(measured["nginx"]) != len(scs)-storeOnly || storeOnly == 0 {
		t.Fatalf("gateway on %v, nginx on %v", measured["gateway"], measured["nginx"])
	}
	for _, name := range []string{"files-upload-1kib", "files-upload-1mib"} {
		if !slices.Contains(measured[redisTarget], name) || !slices.Contains(measured[blobsTarget], name) {
			t.Fatalf("%s not measured on %s (%v) or %s (%v)", name, redisTarget, measured[redisTarget], blobsTarget, measured[blobsTarget])
		}
	}
	for _, name := range measured[redisTarget] {
		if sc, _ := scenario.Select(scs, []string{name}); !sc[0].Stateful {
			t.Fatalf("%s measured on %s", redisTarget, name)
		}
	}
}

// A full run's floor relays start, relay the chat scenarios and alpha's
// streamed messages without an error, and are measured on nothing else;
// fasthttp's relays the paced streams, as the gateway does, every stream
// complete.
func TestFloorsRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the gateway, the simulators and the floor relays")
	}
	out := t.TempDir()
	var log bytes.Buffer
	err := run(context.Background(), []string{"-build", "-no-nginx", "-no-redis", "-scenarios", "chat,chat-stream,messages-stream,llm-streams",
		"-rounds", "1", "-duration", "300ms", "-out", out,
		"-paced-streams", "20", "-paced-events", "3", "-paced-first-event", "20ms", "-paced-event-delay", "5ms"}, &log, io.Discard)
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, log.String())
	}
	f, err := os.Open(filepath.Join(out, report.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := report.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, sc := range res.Scenarios {
		if sc.Name == "llm-streams" {
			checkPaced(t, &sc, log.String())
			continue
		}
		for _, tg := range sc.Targets {
			if tg.Name != "go-relay" && tg.Name != "fasthttp-relay" {
				continue
			}
			if tg.Skipped != "" || len(tg.Rounds) != 1 {
				t.Fatalf("%s on %s: skipped %q, %d rounds; log:\n%s", tg.Name, sc.Name, tg.Skipped, len(tg.Rounds), log.String())
			}
			r := tg.Rounds[0].Result
			if r.OK == 0 || r.ErrorCount() != 0 {
				t.Fatalf("%s on %s: %d ok, %d errors; log:\n%s", tg.Name, sc.Name, r.OK, r.ErrorCount(), log.String())
			}
			seen[tg.Name+" "+sc.Name] = true
		}
	}
	if len(seen) != 6 {
		t.Fatalf("measured: %v; log:\n%s", seen, log.String())
	}
}

// checkPaced checks that the gateway, direct and fasthttp's relay ran the
// paced streams once each, every stream complete, and go's relay did not.
func checkPaced(t *testing.T, sc *report.Scenario, log string) {
	t.Helper()
	got := map[string]bool{}
	for _, tg := range sc.Targets {
		if tg.Name == "nginx" {
			continue // -no-nginx
		}
		if len(tg.Paced) != 1 || tg.Paced[0].Completed != 20 || tg.Paced[0].ErrorCount() != 0 || tg.Paced[0].Delay.Count != 20*6 {
			t.Fatalf("%s on llm-streams: %+v; log:\n%s", tg.Name, tg.Paced, log)
		}
		got[tg.Name] = true
	}
	if !got["gateway"] || !got["direct"] || !got["fasthttp-relay"] || got["go-relay"] {
		t.Fatalf("llm-streams measured on %v", got)
	}
}

func TestPacedSizes(t *testing.T) {
	fit, lowered := pacedSizes([]int{2000, 10000, 20000}, 20000)
	if !slices.Equal(fit, []int{2000, 9488}) || !slices.Equal(lowered, []int{10000, 20000}) {
		t.Fatalf("fit %v, lowered %v", fit, lowered)
	}
	fit, lowered = pacedSizes([]int{2000, 5000}, 1<<20)
	if !slices.Equal(fit, []int{2000, 5000}) || lowered != nil {
		t.Fatalf("fit %v, lowered %v", fit, lowered)
	}
}

// Quick mode never asks for thousands of paced streams; the full run asks
// for the sizes.
func TestPacedDefaults(t *testing.T) {
	o, err := parseFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := o.params()
	p.EnsureDefaults()
	if slices.Max(p.PacedStreams) > 1000 || p.PacedEvents > 20 {
		t.Fatalf("quick mode runs %v streams of %d events", p.PacedStreams, p.PacedEvents)
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p = o.params()
	p.EnsureDefaults()
	if !slices.Equal(p.PacedStreams, []int{2000, 10000, 20000}) || p.PacedEvents != 100 {
		t.Fatalf("full mode runs %v streams of %d events", p.PacedStreams, p.PacedEvents)
	}
	o, err = parseFlags([]string{"-paced-streams", "2000, 5000"}, io.Discard)
	if err != nil || !slices.Equal(o.pacedStreams, []int{2000, 5000}) {
		t.Fatalf("-paced-streams: %v, %v", o, err)
	}
	for _, bad := range []string{"0", "x", "10,"} {
		if _, err := parseFlags([]string{"-paced-streams", bad}, io.Discard); err == nil {
			t.Fatalf("-paced-streams %q accepted", bad)
		}
	}
}

// TestInterruptStopsEverything interrupts a run during its first scenario and
// checks that every process it started is gone and nothing was written.
func TestInterruptStopsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the gateway, the simulators and nginx")
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var log bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-quick", "-build", "-scenarios", "chat", "-duration", "1m", "-out", out}, &log, io.Discard)
	}()
	deadline := time.After(3 * time.Minute)
	for !childRuns(t, "-config") {
		select {
		case err := <-done:
			t.Fatalf("the run ended before its gateway started: %v", err)
		case <-deadline:
			cancel()
			t.Fatalf("the gateway never started: %v", <-done)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second) // into the first scenario
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v; log:\n%s", err, log.String())
	}
	if kids, err := load.Children(os.Getpid()); err != nil || len(kids) != 0 {
		t.Fatalf("children left: %v, %v", kids, err)
	}
	if _, err := os.Stat(filepath.Join(out, readmeFile)); !os.IsNotExist(err) {
		t.Fatalf("an interrupted run wrote results: %v", err)
	}
}

// childRuns reports whether a child of this process has arg on its command line.
func childRuns(t *testing.T, arg string) bool {
	t.Helper()
	kids, err := load.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range kids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if bytes.Contains(b, []byte(arg)) {
			return true
		}
	}
	return false
}
