//go:build !race

package proxy

import "testing"

// A paced event relayed on an open stream, one SSE frame from the upstream
// to the client, allocates nothing in steady state, in the whole process:
// upstream, gateway (which writes the stream outside its server) and client.
func TestPacedEventAllocatesNothing(t *testing.T) {
	s := newPacedStream(t)
	for range 20 {
		s.event()
	}
	if s.gw.openStreams() != 1 {
		t.Fatalf("%d streams written outside the server, want 1", s.gw.openStreams())
	}
	allocs := testing.AllocsPerRun(200, s.event)
	if s.failed != nil {
		t.Fatal(s.failed)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per relayed event", allocs)
	}
	s.end(t)
}
