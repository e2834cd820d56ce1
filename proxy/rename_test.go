package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// namedModelYAML serves named-model on d1 only, under each provider's own name.
const namedModelYAML = `  - id: named-model
    image: true
    upstreams: [{name: d1-alpha, model: claude-x}, {name: d1-beta, model: gpt-x}, {name: d1-gamma, model: "gemini/x"}]
  - id: plain-model`

// TestProviderModelNameByteForByte checks the exact bytes a deployment receives when
// it knows the model by its own name: the body's model value is replaced and
// session_id cut, nothing else changes; a continuation without model gets none
// added; gamma gets the name in its path; the ownership record keeps the
// client-facing model id.
func TestProviderModelNameByteForByte(t *testing.T) {
	e := newEnv(t, func(y string) string { return strings.Replace(y, "  - id: plain-model", namedModelYAML, 1) })
	f := func(path string, headers map[string]string, body, wantPath, wantBody string) []byte {
		t.Helper()
		e.resetSims()
		status, _, answer := e.do("POST", path, headers, body)
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, answer)
		}
		got := e.sim("d1").Requests()
		if len(got) != 1 || got[0].Path != wantPath || string(got[0].Body) != wantBody {
			t.Fatalf("%s: upstream got %d requests: %+v\nwant %s %q", path, len(got), got, wantPath, wantBody)
		}
		return answer
	}
	f("/v1/router/beta/v1/chat/completions", bearer(keyA),
		`{ "session_id":"s1", "model" : "named-model","messages":[{"role":"user","content":"model"}]}`,
		"/v1/chat/completions", `{ "model" : "gpt-x","messages":[{"role":"user","content":"model"}]}`)
	f("/v1/router/alpha/v1/messages", bearer(keyA),
		`{"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"model":"named-model","session_id":"s"}`,
		"/v1/messages", `{"max_tokens":8,"messages":[{"role":"user","content":"hi"}],"model":"claude-x"}`)
	f("/v1/router/beta/v1/images/generations", bearer(keyA),
		`{"model":"named-model","prompt":"a cat","size":"1024x1024"}`,
		"/v1/images/generations", `{"model":"gpt-x","prompt":"a cat","size":"1024x1024"}`)
	f(responsesBase+"/input_tokens", bearer(keyA), `{"model":"named-model","input":"hi"}`,
		"/v1/responses/input_tokens", `{"model":"gpt-x","input":"hi"}`)
	f(responsesBase+"/compact", bearer(keyA), `{"input":"hi",  "model":"named-model"}`,
		"/v1/responses/compact", `{"input":"hi",  "model":"gpt-x"}`)
	gammaBody := `{"contents":[{"parts":[{"text":"a cat"}]}],"model":"not-read-here"}`
	f("/v1/router/gamma/v1beta/models/named-model:generateContent", map[string]string{"x-gamma-api-key": keyA}, gammaBody,
		"/v1beta/models/gemini%2Fx:generateContent", gammaBody)

	answer := f(responsesBase, bearer(keyA), `{"model":"named-model","input":"hello"}`,
		"/v1/responses", `{"model":"gpt-x","input":"hello"}`)
	var created struct{ ID string }
	if err := json.Unmarshal(answer, &created); err != nil || created.ID == "" {
		t.Fatalf("create: %s %v", answer, err)
	}
	cont := `{"previous_response_id":"` + created.ID + `","input":"more"}`
	answer = f(responsesBase, bearer(keyA), cont, "/v1/responses", cont)
	var second struct{ ID string }
	json.Unmarshal(answer, &second)
	for _, id := range []string{created.ID, second.ID} {
		if rec, err := e.store.GetResponse(id); err != nil || rec.Model != "named-model" {
			t.Fatalf("record of %s: %+v %v", id, rec, err)
		}
	}
}
