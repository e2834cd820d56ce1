package proxy

import "testing"

// Responses create, compact and input_tokens route by a body session_id like chat does, and
// cut it out: the provider, which refuses unknown fields, never sees it.
func TestResponsesSessionIDSplicedOut(t *testing.T) {
	e := newEnv(t, nil)
	for _, path := range []string{"", "/compact", "/input_tokens"} {
		e.resetSims()
		body := `{"model":"chat-model","session_id":"conv-7","input":"hi"}`
		status, h, got := e.do("POST", responsesBase+path, bearer(keyA), body)
		if status != 200 {
			t.Fatalf("POST %s with session_id: %d %s", path, status, got)
		}
		req := e.received()
		if len(req) != 1 || string(req[0].Body) != `{"model":"chat-model","input":"hi"}` {
			t.Fatalf("POST %s: provider received %q", path, req)
		}
		// routed by the body's session_id: the header with the same key lands alike
		_, h2, _ := e.do("POST", responsesBase+path, withSession(keyA, "conv-7"), `{"model":"chat-model","input":"hi"}`)
		if string(h.Peek("x-sim-deployment")) != string(h2.Peek("x-sim-deployment")) {
			t.Fatalf("POST %s: body session_id and header went to %s and %s", path, h.Peek("x-sim-deployment"), h2.Peek("x-sim-deployment"))
		}
	}
}
