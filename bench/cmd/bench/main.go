// Command bench is the benchmark harness: it starts the upstream simulator,
// the gateway and nginx as separate processes on loopback, runs every
// scenario of bench/scenario against the simulator directly, the gateway and
// nginx in alternating rounds, and writes a markdown table, plots and the raw
// results under -out.
//
//	go run ./bench/cmd/bench -quick                      # make bench: under 3 minutes
//	go run ./bench/cmd/bench                             # make bench-full
//	go run ./bench/cmd/bench -scenarios chat,chat-stream -rounds 5 -duration 10s
//
// The README it writes judges the run against the goals of issues 6
// (goals.go) and 41 (goals41.go), as ratios within the run; how issue 41's
// are judged is in docs/performance.md.
//
// Every process it starts is stopped when it ends, also on error or Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags, after the mode's defaults are applied.
type options struct {
	quick     bool
	out       string
	scenarios []string
	rounds    int
	duration  time.Duration
	warmup    time.Duration
	idleHold  time.Duration
	uploads   uint64
	openRate  float64
	binDir    string
	build     bool
	noNginx   bool
	noRedis   bool
	noFloors  bool
	tlsX25519 bool
	noTracing bool
	noS3      bool

	pacedStreams    []int
	pacedEvents     int
	pacedFirstEvent time.Duration
	pacedEventDelay time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	return runBench(ctx, o, stdout)
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var err error
	fs.SetOutput(stderr)
	var o options
	var scenarios, pacedStreams string
	fs.BoolVar(&o.quick, "quick", false, "quick mode: fewer and shorter rounds, for make bench (under 3 minutes)")
	fs.StringVar(&o.out, "out", "", "directory of README.md, results.json and the plots (default: bench/results of the repository)")
	fs.StringVar(&scenarios, "scenarios", "", "comma-separated scenario names (default: all)")
	fs.IntVar(&o.rounds, "rounds", 0, "measured rounds per scenario and target (default: 2 quick, 3 full)")
	fs.DurationVar(&o.duration, "duration", 0, "length of each measured round (default: 1s quick, 5s full)")
	fs.DurationVar(&o.warmup, "warmup", 0, "warm-up per scenario and target before the rounds (default: duration/4, at most 1s)")
	fs.DurationVar(&o.idleHold, "idle-hold", 0, "how long the idle streams are held (default: 2s quick, 10s full)")
	fs.Uint64Var(&o.uploads, "uploads", 0, "uploads per round of the upload scenario (default: 16 quick, 64 full)")
	fs.Float64Var(&o.openRate, "open-rate", 0, "request rate of the open-loop scenario (default 1000/s)")
	fs.StringVar(&o.binDir, "bin", "", "directory holding gateway and upstream-sim (default: the repo's bin/, built into a temp dir if missing)")
	fs.BoolVar(&o.build, "build", false, "build gateway and upstream-sim into a temp dir even if -bin has them")
	fs.BoolVar(&o.noNginx, "no-nginx", false, "do not run nginx (the reference proxy)")
	fs.BoolVar(&o.noFloors, "no-floors", false, "do not run the two Go relays of bench/cmd/floor on the chat scenarios\n(never run in quick mode)")
	fs.BoolVar(&o.noRedis, "no-redis", false, "do not run the gateway on the redis engine (a Redis Cluster on 127.0.0.1:7191-7196)\nbeside the one on pebble in the stateful scenarios")
	fs.BoolVar(&o.noS3, "no-s3", false, "do not run the gateway on the redis engine with the files' bytes in object storage\n"+
		"(gateway-redis-s3: a versitygw of scripts/s3-server.sh on 127.0.0.1:7431) on the stateful scenarios")
	fs.BoolVar(&o.noTracing, "no-tracing", false, "do not run the gateway with traces on (gateway-traced, exporting to a Jaeger\n"+
		"of scripts/jaeger.sh on 127.0.0.1:14338-14342) beside the plain one on chat and chat-stream")
	fs.BoolVar(&o.tlsX25519, "tls-x25519", false, "the TLS scenarios' client offers X25519 alone, the key exchange nginx's OpenSSL 3.0\n"+
		"agrees on (Go's client otherwise also offers X25519MLKEM768, which the gateway picks)")
	fs.StringVar(&pacedStreams, "paced-streams", "", "comma-separated concurrent streams of llm-streams, each lowered to what the open-files\nlimit allows (default: 200 quick, 2000,10000,20000 full)")
	fs.IntVar(&o.pacedEvents, "paced-events", 0, "content deltas of each llm-streams stream (default: 20 quick, 100 full)")
	fs.DurationVar(&o.pacedFirstEvent, "paced-first-event", 0, "pause before each llm-streams stream's first frame (default 300ms)")
	fs.DurationVar(&o.pacedEventDelay, "paced-event-delay", 0, "pause between the frames of an llm-streams stream (default 40ms)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.pacedStreams, err = parseSizes(pacedStreams); err != nil {
		return nil, fmt.Errorf("-paced-streams: %w", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if scenarios != "" {
		o.scenarios = strings.Split(scenarios, ",")
	}
	o.ensureDefaults()
	if o.rounds < 1 || o.duration < 100*time.Millisecond {
		return nil, fmt.Errorf("-rounds must be at least 1 and -duration at least 100ms")
	}
	return &o, nil
}

// ensureDefaults applies the mode's sizes to the flags left unset.
func (o *options) ensureDefaults() {
	pick := func(quick, full time.Duration) time.Duration {
		if o.quick {
			return quick
		}
		return full
	}
	if o.quick {
		o.noFloors = true // make bench stays under 3 minutes
	}
	if o.rounds == 0 {
		o.rounds = 3
		if o.quick {
			o.rounds = 2
		}
	}
	if o.duration == 0 {
		o.duration = pick(time.Second, 5*time.Second)
	}
	if o.warmup == 0 {
		o.warmup = min(o.duration/4, time.Second)
	}
	if o.idleHold == 0 {
		o.idleHold = pick(2*time.Second, 10*time.Second)
	}
	if o.quick && len(o.pacedStreams) == 0 {
		o.pacedStreams = []int{200} // thousands of streams are for the full run
	}
	if o.quick && o.pacedEvents == 0 {
		o.pacedEvents = 20
	}
	if o.uploads == 0 {
		o.uploads = 64
		if o.quick {
			o.uploads = 16
		}
	}
}

// parseSizes parses a comma-separated list of positive counts; "" is none.
func parseSizes(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("invalid count %q", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

func (o *options) mode() string {
	if o.quick {
		return "quick"
	}
	return "full"
}
