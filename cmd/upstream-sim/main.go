// Command upstream-sim serves one simulated provider deployment (alpha, beta and
// gamma families on one listener) for tests, benchmarks and the offline demo.
// It prints the address it listens on and exits on SIGINT or SIGTERM.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelgate/gateway/bench/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "upstream-sim:", err)
		os.Exit(2)
	}
}

// options are the command line: the simulator's options and the process knobs.
type options struct {
	sim    sim.Options
	listen string
	models string
	record bool
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stdout, stderr)
	if err != nil {
		return err
	}
	o.sim.NoRecord = !o.record
	if o.models != "" {
		o.sim.Models = strings.Split(o.models, ",")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s, err := sim.Listen(o.listen, o.sim)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s.Addr())
	<-sig
	if err := s.Close(); err != nil {
		return fmt.Errorf("cannot close the simulator: %w", err)
	}
	return nil
}

// parseArgs reads the flags; -help prints the usage to stdout.
func parseArgs(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("upstream-sim", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9090", "`address` to listen on (port 0: any free port)")
	fs.StringVar(&o.sim.Name, "name", "sim", "deployment `name`, echoed in x-sim-deployment and answers")
	fs.StringVar(&o.sim.AlphaKey, "alpha-key", "", "expected x-api-key of alpha calls (empty: any key)")
	fs.StringVar(&o.sim.BetaKey, "beta-key", "", "expected Bearer key of beta calls (empty: any key)")
	fs.StringVar(&o.sim.GammaKey, "gamma-key", "", "expected x-goog-api-key of gamma calls (empty: any key)")
	fs.DurationVar(&o.sim.Latency, "latency", 0, "delay before the answer headers")
	fs.IntVar(&o.sim.StreamEvents, "events", 20, "content deltas per stream")
	fs.DurationVar(&o.sim.EventDelay, "event-delay", 0, "delay between stream frames")
	fs.IntVar(&o.sim.ChatBytes, "chat-bytes", 400, "approximate size of an answer's text")
	fs.BoolVar(&o.record, "record", false, "keep the last requests in memory (for tests that embed the simulator; off for load)")
	fs.Bool("no-record", false, "accepted for old scripts: recording is off unless -record")
	fs.StringVar(&o.models, "models", "", "comma-separated model ids to serve (empty: any model)")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := stderr
		if len(args) > 0 && isHelp(args) {
			w = stdout
		}
		fmt.Fprintln(w, "Usage: upstream-sim [flags]\n\nServes one simulated provider deployment of every family; prints its address.\n\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

func isHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			return true
		}
	}
	return false
}
