// Command upstream-sim serves one simulated provider deployment (alpha, beta and
// gamma families on one listener) for tests, benchmarks and the offline demo.
// It prints the address it listens on and exits on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelgate/gateway/bench/sim"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	var o sim.Options
	flag.StringVar(&o.Name, "name", "sim", "deployment name, echoed in x-sim-deployment and answers")
	flag.StringVar(&o.AlphaKey, "alpha-key", "", "expected x-api-key of alpha calls (empty: any key)")
	flag.StringVar(&o.BetaKey, "beta-key", "", "expected Bearer key of beta calls (empty: any key)")
	flag.StringVar(&o.GammaKey, "gamma-key", "", "expected x-goog-api-key of gamma calls (empty: any key)")
	flag.DurationVar(&o.Latency, "latency", 0, "delay before the answer headers")
	flag.IntVar(&o.StreamEvents, "events", 20, "content deltas per stream")
	flag.DurationVar(&o.EventDelay, "event-delay", 0, "delay between stream frames")
	flag.IntVar(&o.ChatBytes, "chat-bytes", 400, "approximate size of an answer's text")
	flag.BoolVar(&o.NoRecord, "no-record", true, "do not record requests")
	models := flag.String("models", "", "comma-separated model ids to serve (empty: any model)")
	flag.Parse()
	if *models != "" {
		o.Models = strings.Split(*models, ",")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s, err := sim.Listen(*listen, o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Addr())
	<-sig
	if err := s.Close(); err != nil {
		log.Fatalf("cannot close the simulator: %v", err)
	}
}
