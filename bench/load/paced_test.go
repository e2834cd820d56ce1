package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

func TestStampScanner(t *testing.T) {
	stream := ": t=100\ndata: {\"a\":1}\n\n: ping\r\n: t=2x\r\ndata: b\r\n\r\n: t=300\rdata: c\r\r" +
		": t=12345678901234567890123\ndata: d\n\n"
	// Every split point: stamps and events come out the same.
	for cut := range len(stream) + 1 {
		var s StampScanner
		_, _ = s.Write([]byte(stream[:cut]))
		got := append([]int64(nil), s.Take()...)
		_, _ = s.Write([]byte(stream[cut:]))
		got = append(got, s.Take()...)
		if len(got) != 2 || got[0] != 100 || got[1] != 300 {
			t.Fatalf("cut at %d: stamps %v, want [100 300]", cut, got)
		}
		if s.Events() != 4 || s.Malformed() != 1 {
			t.Fatalf("cut at %d: %d events, %d malformed; want 4, 1", cut, s.Events(), s.Malformed())
		}
	}
	if StampPrefix != sim.StampPrefix {
		t.Fatalf("StampPrefix %q, the simulator's %q", StampPrefix, sim.StampPrefix)
	}
}

// TestRunPaced runs paced streams against the simulator: every stream
// completes with its events, every event's delay is measured, the first
// event's added time excludes the asked-for pause, and a stream without
// stamps fails the check.
func TestRunPaced(t *testing.T) {
	s, err := sim.Listen("127.0.0.1:0", sim.Options{BetaKey: "k", NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const streams, deltas = 40, 5
	spec := &Spec{
		URL: s.URL() + "/v1/chat/completions",
		Headers: []Header{{"Authorization", "Bearer k"}, {"Content-Type", "application/json"},
			{"x-sim-events", "5"}, {"x-sim-first-event", "50ms"}, {"x-sim-event-delay", "10ms"}, {"x-sim-stamp", "1"}},
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`),
	}
	opts := PacedOptions{Streams: streams, Events: deltas + 3, FirstEvent: 50 * time.Millisecond,
		EventDelay: 10 * time.Millisecond, Timeout: 30 * time.Second}
	res, err := RunPaced(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != streams || res.ErrorCount() != 0 || res.Events != streams*(deltas+3) {
		t.Fatalf("completed %d, errors %v, events %d; want %d, none, %d", res.Completed, res.Errors, res.Events, streams, streams*(deltas+3))
	}
	if res.Delay.Count != int64(res.Events) || res.FirstEventAdded.Count != streams {
		t.Fatalf("%d delays, %d first events; want %d, %d", res.Delay.Count, res.FirstEventAdded.Count, res.Events, streams)
	}
	// Generous: the delays are loopback hops, far below the pacing.
	if res.FirstEventAdded.P50 > 10*time.Second || res.Delay.Max > 10*time.Second {
		t.Fatalf("first event added %v, delay max %v", res.FirstEventAdded.P50, res.Delay.Max)
	}

	unstamped := *spec
	unstamped.Headers = unstamped.Headers[:len(spec.Headers)-1]
	opts.Streams = 3
	res, err = RunPaced(context.Background(), &unstamped, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 0 || res.Errors[ErrKindCheck] != 3 {
		t.Fatalf("without stamps: completed %d, errors %v; want 0, 3 check", res.Completed, res.Errors)
	}
	if !strings.HasPrefix(res.URL, "http://127.0.0.1:") {
		t.Fatalf("URL %q", res.URL)
	}
}

func TestPacedBytesPerStream(t *testing.T) {
	r := PacedResult{RSSBefore: 100 << 20, RSSAtMaxOpen: 110 << 20, MaxOpen: 1024}
	if got := r.BytesPerStream(); got != 10<<10 {
		t.Fatalf("from RSS before: %v", got)
	}
	// A later round: the RSS before holds what the earlier round took.
	r.RSSBaseline = 90 << 20
	if got := r.BytesPerStream(); got != 20<<10 {
		t.Fatalf("from the baseline: %v", got)
	}
	r.MaxOpen = 0
	if got := r.BytesPerStream(); got != 0 {
		t.Fatalf("none open: %v", got)
	}
}
