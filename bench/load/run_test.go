package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestRunClosedCountsMatchServer(t *testing.T) {
	s := newTestServer(t)
	spec := &Spec{URL: s.URL + "/ok"}
	r, err := Run(context.Background(), spec, Options{Connections: 4, MaxRequests: 1000, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.requests.Load(); got != 1000 {
		t.Fatalf("server saw %d requests, want 1000", got)
	}
	if r.Requests != 1000 || r.OK != 1000 || len(r.Errors) != 0 {
		t.Fatalf("requests=%d ok=%d errors=%v, want 1000 ok", r.Requests, r.OK, r.Errors)
	}
	if r.Mode != "closed" || r.Connections != 4 || r.Statuses[200] != 1000 {
		t.Fatalf("mode=%q conns=%d statuses=%v", r.Mode, r.Connections, r.Statuses)
	}
	if r.Bytes != 1000*uint64(len("hello")) {
		t.Fatalf("bytes=%d, want %d", r.Bytes, 1000*len("hello"))
	}
	if r.Latency.Count != 1000 || r.LatencyHist.Count() != 1000 || r.TTFB.Count != 1000 {
		t.Fatalf("latency count %d, hist %d, ttfb %d", r.Latency.Count, r.LatencyHist.Count(), r.TTFB.Count)
	}
	l := r.Latency
	if !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Fatalf("percentiles out of order: %+v", l)
	}
	if r.RPS <= 0 || r.Elapsed <= 0 {
		t.Fatalf("rps=%v elapsed=%v", r.RPS, r.Elapsed)
	}
}

func TestRunClosedDurationBound(t *testing.T) {
	s := newTestServer(t)
	spec := &Spec{URL: s.URL + "/slow?ms=50"}
	const d = 300 * time.Millisecond
	r, err := Run(context.Background(), spec, Options{Connections: 2, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	// Each connection starts a request at most every 50 ms, and none after d.
	if max := uint64(2 * (d/(50*time.Millisecond) + 1)); r.Requests > max || r.Requests < 2 {
		t.Fatalf("requests=%d, want 2..%d", r.Requests, max)
	}
	if r.Elapsed < d {
		t.Fatalf("elapsed %v < duration %v", r.Elapsed, d)
	}
	if got := s.requests.Load(); uint64(got) != r.Requests {
		t.Fatalf("server saw %d, result says %d", got, r.Requests)
	}
	if r.Latency.Min < 50*time.Millisecond {
		t.Fatalf("min latency %v below the server's 50 ms", r.Latency.Min)
	}
}

func TestRunCountsErrors(t *testing.T) {
	s := newTestServer(t)
	r, err := Run(context.Background(), &Spec{URL: s.URL + "/fail"}, Options{Connections: 4, MaxRequests: 300})
	if err != nil {
		t.Fatal(err)
	}
	fails := uint64(s.fails.Load())
	if fails != 100 || r.Errors[ErrKindStatus] != fails || r.Statuses[500] != fails {
		t.Fatalf("server failed %d; errors=%v statuses=%v", fails, r.Errors, r.Statuses)
	}
	if r.OK != 200 || r.Requests != 300 || r.ErrorCount() != 100 || r.Latency.Count != 200 {
		t.Fatalf("ok=%d requests=%d latency count=%d", r.OK, r.Requests, r.Latency.Count)
	}

	s = newTestServer(t)
	r, err = Run(context.Background(), &Spec{URL: s.URL + "/reset"}, Options{Connections: 3, MaxRequests: 200})
	if err != nil {
		t.Fatal(err)
	}
	resets := uint64(s.resets.Load())
	if resets != 50 || r.Errors[ErrKindClosed] != resets || r.OK != 150 || r.Requests != 200 {
		t.Fatalf("server reset %d; ok=%d requests=%d errors=%v", resets, r.OK, r.Requests, r.Errors)
	}
}

func TestRunRefusedAndStatusCheck(t *testing.T) {
	s := newTestServer(t)
	r, err := Run(context.Background(), &Spec{URL: s.URL + "/ok", Check: Check{Status: 201}}, Options{MaxRequests: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors[ErrKindStatus] != 10 || r.OK != 0 {
		t.Fatalf("errors=%v ok=%d, want 10 status errors", r.Errors, r.OK)
	}

	// A port that was just free: nothing listens there.
	addr := s.listener.Addr().String()
	_ = s.srv.Shutdown()
	_ = s.listener.Close()
	<-s.serveDone
	r, err = Run(context.Background(), &Spec{URL: "http://" + addr + "/ok"}, Options{Connections: 2, MaxRequests: 6})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors[ErrKindRefused] != 6 || r.Requests != 6 {
		t.Fatalf("errors=%v requests=%d, want 6 refused", r.Errors, r.Requests)
	}
}

func TestRunSSE(t *testing.T) {
	s := newTestServer(t)
	spec := &Spec{URL: s.URL + "/sse?n=7", Check: Check{SSE: true, Events: 7}}
	r, err := Run(context.Background(), spec, Options{Connections: 3, MaxRequests: 60})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 60 || r.Events != 60*7 || len(r.Errors) != 0 {
		t.Fatalf("ok=%d events=%d errors=%v, want 60 ok and 420 events", r.OK, r.Events, r.Errors)
	}

	spec = &Spec{URL: s.URL + "/sse?n=7&cut=5", Check: Check{SSE: true, Events: 7}}
	r, err = Run(context.Background(), spec, Options{Connections: 3, MaxRequests: 30})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Errors[ErrKindCheck] != 30 {
		t.Fatalf("ok=%d errors=%v, want 30 check errors for cut streams", r.OK, r.Errors)
	}

	spec = &Spec{URL: s.URL + "/sse?n=50", Check: Check{SSE: true, MaxBody: 200}}
	r, err = Run(context.Background(), spec, Options{Connections: 1, MaxRequests: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors[ErrKindTooLarge] != 3 {
		t.Fatalf("errors=%v, want 3 too_large", r.Errors)
	}
}

func TestRunTTFBStreamed(t *testing.T) {
	s := newTestServer(t)
	spec := &Spec{URL: s.URL + "/sse-wait?ms=100", Check: Check{SSE: true, Events: 2}}
	r, err := Run(context.Background(), spec, Options{Connections: 2, MaxRequests: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 4 {
		t.Fatalf("ok=%d errors=%v", r.OK, r.Errors)
	}
	if r.Latency.Min < 100*time.Millisecond {
		t.Fatalf("latency min %v, the body takes at least 100 ms", r.Latency.Min)
	}
	if r.TTFB.Max > r.Latency.Max || r.TTFB.P50 > r.Latency.P50 {
		t.Fatalf("ttfb %+v after latency %+v", r.TTFB, r.Latency)
	}
}

func TestRunOpenCountAndRateBound(t *testing.T) {
	s := newTestServer(t)
	r, err := Run(context.Background(), &Spec{URL: s.URL + "/ok"}, Options{Rate: 2000, Concurrency: 16, MaxRequests: 500, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.requests.Load(); got != 500 || r.Requests != 500 || r.OK != 500 {
		t.Fatalf("server %d, requests %d, ok %d: want 500", got, r.Requests, r.OK)
	}
	if r.Mode != "open" || r.Rate != 2000 || r.Connections != 16 {
		t.Fatalf("mode=%q rate=%v conns=%d", r.Mode, r.Rate, r.Connections)
	}

	// At 1,000 req/s for 200 ms exactly the sends intended before the end happen.
	s = newTestServer(t)
	r, err = Run(context.Background(), &Spec{URL: s.URL + "/ok"}, Options{Rate: 1000, Concurrency: 8, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.requests.Load(); got != 200 || r.Requests != 200 {
		t.Fatalf("server %d, requests %d: want 200", got, r.Requests)
	}
}

// TestRunOpenCoordinatedOmission sends 20 requests intended 10 ms apart
// through one slot to a server that takes 30 ms each: request i cannot end
// before 30(i+1) ms, 10i ms after its intended start, so its latency is at
// least 20i+30 ms. A generator measuring from the actual send would see 30 ms.
func TestRunOpenCoordinatedOmission(t *testing.T) {
	s := newTestServer(t)
	r, err := Run(context.Background(), &Spec{URL: s.URL + "/slow?ms=30"}, Options{Rate: 100, Concurrency: 1, MaxRequests: 20})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 20 {
		t.Fatalf("ok=%d errors=%v", r.OK, r.Errors)
	}
	if r.Latency.Max < 410*time.Millisecond {
		t.Fatalf("max latency %v; from the intended send it is at least 410 ms", r.Latency.Max)
	}
	if r.Late == 0 {
		t.Fatal("no late sends reported for a target slower than the rate")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	s := newTestServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, o := range []Options{{Connections: 2}, {Rate: 10, Concurrency: 2}} {
		r, err := Run(ctx, &Spec{URL: s.URL + "/ok"}, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Requests != 0 {
			t.Fatalf("%+v: %d requests after cancel", o, r.Requests)
		}
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	f := func(url string, want error) {
		t.Helper()
		_, err := Run(context.Background(), &Spec{URL: url}, Options{MaxRequests: 1})
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("Run(%q) error %v, want %v", url, err, want)
		}
	}
	f("http://10.1.2.3:80/", ErrNotLoopback)
	f("http://192.168.0.1/", ErrNotLoopback)
	f("http://example.com/", ErrNotLoopback)
	f("http://localhost:8080/", ErrNotLoopback)
	f("https://127.0.0.1/", nil)
	f("::bad", nil)

	for _, ok := range []string{"http://127.0.0.1:1/x", "http://127.9.9.9/x", "http://[::1]:8080/x"} {
		if _, err := hostAddr(ok); err != nil {
			t.Fatalf("hostAddr(%q): %v", ok, err)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "[::1]:1": true, "10.0.0.1:80": false, "http://8.8.8.8/": false} {
		if err := CheckLoopback(addr); (err == nil) != want {
			t.Fatalf("CheckLoopback(%q) = %v", addr, err)
		}
	}
}

func TestSessionPool(t *testing.T) {
	s := newTestServer(t)
	pool := NewSessionPool(10, "sess-")
	mutBody, err := pool.BodyMutator([]byte(`{"session_id":"SID","model":"m"}`), []byte("SID"))
	if err != nil {
		t.Fatal(err)
	}
	mutHeader := pool.HeaderMutator("x-session-id")
	spec := &Spec{
		Method: "POST",
		URL:    s.URL + "/session",
		Mutate: func(req *fasthttp.Request, seq uint64) { mutHeader(req, seq); mutBody(req, seq) },
	}
	r, err := Run(context.Background(), spec, Options{Connections: 3, MaxRequests: 100})
	if err != nil || r.OK != 100 {
		t.Fatalf("err=%v ok=%d errors=%v", err, r.OK, r.Errors)
	}
	if len(s.sessions) != 10 || len(s.bodies) != 10 {
		t.Fatalf("sessions %v bodies %v, want 10 of each", s.sessions, s.bodies)
	}
	for i := range 10 {
		id := fmt.Sprintf("sess-%d", i)
		body := fmt.Sprintf(`{"session_id":"%s","model":"m"}`, id)
		if s.sessions[id] != 10 || s.bodies[body] != 10 {
			t.Fatalf("%s seen %d times in headers, %d in bodies; want 10", id, s.sessions[id], s.bodies[body])
		}
	}
	if _, err := pool.BodyMutator([]byte("{}"), []byte("SID")); err == nil {
		t.Fatal("BodyMutator accepted a template without the placeholder")
	}
}

func TestResultJSONAndMerge(t *testing.T) {
	s := newTestServer(t)
	a, err := Run(context.Background(), &Spec{URL: s.URL + "/ok"}, Options{Connections: 2, MaxRequests: 200})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), &Spec{URL: s.URL + "/fail"}, Options{Connections: 2, MaxRequests: 30})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.LatencyHist.Count() != 200 || back.LatencyHist.Summary() != a.Latency || back.Latency != a.Latency {
		t.Fatalf("histogram did not survive JSON: %+v vs %+v", back.LatencyHist.Summary(), a.Latency)
	}
	m := Merge(a, b)
	if m.Requests != 230 || m.OK != 220 || m.Errors[ErrKindStatus] != 10 || m.LatencyHist.Count() != 220 {
		t.Fatalf("merged requests=%d ok=%d errors=%v count=%d", m.Requests, m.OK, m.Errors, m.LatencyHist.Count())
	}
	if m.Elapsed != a.Elapsed+b.Elapsed || m.Statuses[200] != 220 {
		t.Fatalf("merged elapsed %v statuses %v", m.Elapsed, m.Statuses)
	}
	if bb := Merge(b, b); bb.Errors[ErrKindStatus] != 20 || b.Errors[ErrKindStatus] != 10 {
		t.Fatalf("Merge(b, b) errors %v, b now %v", bb.Errors, b.Errors)
	}
}

func TestHistogramClamps(t *testing.T) {
	h := NewHistogram()
	h.Record(-time.Second)
	h.Record(time.Hour)
	h.Record(1500 * time.Microsecond)
	if h.Count() != 3 {
		t.Fatalf("count %d", h.Count())
	}
	if got := h.Percentile(100); got < 59*time.Second || got > 61*time.Second {
		t.Fatalf("max %v, want about 60 s", got)
	}
	if got := h.Percentile(50); got < 1499*time.Microsecond || got > 1502*time.Microsecond {
		t.Fatalf("p50 %v, want 1.5 ms within 3 digits", got)
	}
}
