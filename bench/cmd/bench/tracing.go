package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelgate/gateway/bench/scenario"
)

// The gateway with traces on, measured beside the one without on
// tracedScenarios: what tracing every call adds to the gateway's CPU per call.
const (
	tracedTarget = "gateway-traced"
	// jaegerPort is the first of the five loopback ports of the run's
	// Jaeger (scripts/jaeger.sh): apart from the trace tests' 14318.
	jaegerPort    = 14338
	jaegerTimeout = 10 * time.Minute // a first build takes minutes
)

// tracedScenarios are the scenarios the traced gateway is measured on.
var tracedScenarios = []string{"chat", "chat-stream"}

// startTracing starts a real Jaeger (scripts/jaeger.sh, built when missing
// unless quick) and the gateway exporting every call's spans to it. A
// Jaeger that cannot be had is a skipped target, with its reason; a
// gateway that does not start with it is an error.
func (d *deployment) startTracing(ctx context.Context, root string, quick bool, log io.Writer) error {
	script := filepath.Join(root, "scripts", "jaeger.sh")
	if quick && !isExecutable(filepath.Join(root, ".cache", "bin", "jaeger")) {
		d.tracedSkipped = "Jaeger not built (quick mode does not build it: scripts/jaeger.sh build)"
		fmt.Fprintf(log, "tracing: skipped: %s\n", d.tracedSkipped)
		return nil
	}
	dir := filepath.Join(d.dir, "jaeger")
	ctx, cancel := context.WithTimeout(ctx, jaegerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "start", dir)
	cmd.Env = append(os.Environ(), fmt.Sprintf("JAEGER_PORT=%d", jaegerPort))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	d.jaegerDir = dir // stopped by close even when start failed half-way
	lines := strings.Fields(string(out))
	if err != nil || len(lines) == 0 {
		d.tracedSkipped = "Jaeger not available: " + oneLine(fmt.Sprint(err, ": ", stderr.String()), 200)
		fmt.Fprintf(log, "tracing: skipped: %s\n", d.tracedSkipped)
		return nil
	}
	d.otlpEndpoint = lines[0]
	fmt.Fprintf(log, "tracing: Jaeger's OTLP/HTTP receiver on %s\n", d.otlpEndpoint)
	return d.startTracedGateway()
}

// startTracedGateway starts the gateway with traces on, if there is a Jaeger.
func (d *deployment) startTracedGateway() error {
	if d.otlpEndpoint == "" {
		return nil
	}
	gc := scenario.GatewayConfig{StorePath: filepath.Join(d.dir, "store-traced"), TracingEndpoint: d.otlpEndpoint}
	var err error
	d.tracedGw, d.tracedGwAddr, err = d.launchGateway(tracedTarget, gc)
	return err
}

// stopJaeger stops the run's Jaeger, if it started one.
func (d *deployment) stopJaeger(log io.Writer) {
	if d.jaegerDir == "" {
		return
	}
	root, err := repoRoot()
	if err == nil {
		cmd := exec.Command(filepath.Join(root, "scripts", "jaeger.sh"), "stop", d.jaegerDir)
		var out []byte
		if out, err = cmd.CombinedOutput(); err != nil {
			err = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
	}
	if err != nil {
		fmt.Fprintf(log, "warning: cannot stop Jaeger: %v\n", err)
	}
}

// tracedTargetOf returns the traced gateway's target, skipped with its reason
// when there is none.
func (d *deployment) tracedTargetOf() target {
	t := target{Target: scenario.Target{Name: tracedTarget, Kind: scenario.Gateway}, skipped: d.tracedSkipped, only: tracedScenarios}
	if d.tracedGw != nil {
		t.URL, t.pids = "http://"+d.tracedGwAddr, []int{d.tracedGw.pid()}
	}
	return t
}
