//go:build !race

package parse

import "testing"

func TestUsageScannerAllocatesNothing(t *testing.T) {
	b := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n")
	s := new(UsageScanner)
	if n := testing.AllocsPerRun(100, func() { s.Reset(); s.Feed(b) }); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
	if u := s.Usage(); u.Input != 25 || u.Output != 15 {
		t.Fatalf("usage %+v", u)
	}
}

func TestIdentityScannerAllocatesNothing(t *testing.T) {
	b := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":25}}}\n\n")
	s := new(IdentityScanner)
	if n := testing.AllocsPerRun(100, func() { s.Reset(IdentityKeys{In: "message", ID: "id", Model: "model"}); s.Feed(b) }); n != 0 {
		t.Fatalf("%v allocations per scan", n)
	}
	if id, model := s.Identity(); string(id) != "msg_1" || string(model) != "claude-x" {
		t.Fatalf("id %q model %q", id, model)
	}
}
