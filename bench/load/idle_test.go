package load

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestHoldIdle(t *testing.T) {
	s := newTestServer(t)
	spec := &Spec{URL: s.URL + "/idle", Check: Check{SSE: true}}
	const k = 50
	r, err := HoldIdle(context.Background(), spec, IdleOptions{
		Streams:         k,
		Hold:            200 * time.Millisecond,
		OpenConcurrency: 8,
		PIDs:            []int{os.Getpid()},
		SampleInterval:  10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Opened != k || len(r.Errors) != 0 {
		t.Fatalf("opened %d of %d, errors %v", r.Opened, k, r.Errors)
	}
	if got := s.idleMax.Load(); got != k {
		t.Fatalf("server held at most %d streams at once, want %d", got, k)
	}
	if got := s.requests.Load(); got != k {
		t.Fatalf("server saw %d requests, want %d", got, k)
	}
	if r.RSSBefore == 0 || r.RSSHeld == 0 || r.RSSPeak < r.RSSHeld {
		t.Fatalf("rss before %d held %d peak %d", r.RSSBefore, r.RSSHeld, r.RSSPeak)
	}
	if r.FileLimit < k {
		t.Fatalf("file limit %d", r.FileLimit)
	}
	if r.RSSHeld > r.RSSBefore && r.BytesPerStream != float64(r.RSSHeld-r.RSSBefore)/k {
		t.Fatalf("bytes per stream %v from %d..%d", r.BytesPerStream, r.RSSBefore, r.RSSHeld)
	}
}

func TestHoldIdleCountsFailures(t *testing.T) {
	s := newTestServer(t)
	// /fail answers 500 to every third request: those streams do not open.
	r, err := HoldIdle(context.Background(), &Spec{URL: s.URL + "/fail"}, IdleOptions{Streams: 30, Hold: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Opened != 20 || r.Errors[ErrKindStatus] != 10 {
		t.Fatalf("opened %d, errors %v; want 20 and 10 status errors", r.Opened, r.Errors)
	}
	// Streams that close before their first event fail an SSE check.
	r, err = HoldIdle(context.Background(), &Spec{URL: s.URL + "/sse?n=0", Check: Check{SSE: true}}, IdleOptions{Streams: 5, Hold: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Opened != 0 || r.Errors[ErrKindBody]+r.Errors[ErrKindClosed] != 5 {
		t.Fatalf("opened %d, errors %v; want 5 failures", r.Opened, r.Errors)
	}
	if _, err := HoldIdle(context.Background(), &Spec{URL: "http://10.0.0.1/"}, IdleOptions{}); err == nil {
		t.Fatal("HoldIdle accepted a non-loopback target")
	}
}
