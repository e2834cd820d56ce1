package parse

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestAppendForUpstream checks byte for byte that the model's value is replaced and every
// session_id member cut in one pass, and nothing else changes.
func TestAppendForUpstream(t *testing.T) {
	f := func(body, model, want string) {
		t.Helper()
		var fl Fields
		if err := Peek([]byte(body), &fl); err != nil {
			t.Fatalf("Peek(%q): %s", body, err)
		}
		var modelJSON []byte
		if model != "" {
			modelJSON = []byte(model)
		}
		out := AppendForUpstream([]byte("prefix:"), []byte(body), &fl, modelJSON)
		if !bytes.HasPrefix(out, []byte("prefix:")) {
			t.Fatalf("AppendForUpstream dropped dst: %q", out)
		}
		if got := string(out[len("prefix:"):]); got != want {
			t.Fatalf("AppendForUpstream(%q, %s)\n got %q\nwant %q", body, model, got, want)
		}
		if !json.Valid([]byte(want)) {
			t.Fatalf("BUG: want %q is not JSON", want)
		}
	}
	// the model alone
	f(`{"model":"m","messages":[]}`, `"claude-x"`, `{"model":"claude-x","messages":[]}`)
	f(`{"messages":[] , "model" : "m" }`, `"gpt-4o"`, `{"messages":[] , "model" : "gpt-4o" }`)
	f(`{"mod\u0065l":"m\u00e9","x":"model"}`, `"p"`, `{"mod\u0065l":"p","x":"model"}`)
	f(`{"x":{"model":"inner"},"model":"m"}`, `"p"`, `{"x":{"model":"inner"},"model":"p"}`)
	// with session_id before, after and around it
	f(`{"session_id":"s","model":"m","a":1}`, `"p"`, `{"model":"p","a":1}`)
	f(`{"model":"m","session_id":"s"}`, `"p"`, `{"model":"p"}`)
	f(`{"a":1,"model":"m", "session_id":"s", "b":2}`, `"p"`, `{"a":1,"model":"p", "b":2}`)
	f(`{"a":1,"session_id":"s","b":2,"model":"m"}`, `"longer-name"`, `{"a":1,"b":2,"model":"longer-name"}`)
	// no model in the body (a continuation): nothing is added
	f(`{"previous_response_id":"resp_1","session_id":"s","input":"hi"}`, `"p"`, `{"previous_response_id":"resp_1","input":"hi"}`)
	f(`{"input":"hi"}`, `"p"`, `{"input":"hi"}`)
	// no deployment name: the session_id cut alone
	f(`{"model":"m","session_id":"s"}`, ``, `{"model":"m"}`)
	f(`{"model":"m"}`, ``, `{"model":"m"}`)
}

// FuzzAppendForUpstream checks that the result is valid JSON whose top-level model is the
// replacement (when the body had one), with no session_id, and that its other members are
// the body's, byte for byte.
func FuzzAppendForUpstream(f *testing.F) {
	f.Add([]byte(chatBody), "provider-model")
	f.Add([]byte(`{"session_id":"s","model":"m"}`), `q"uote`)
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		var fl Fields
		if Peek(body, &fl) != nil {
			return
		}
		modelJSON, _ := json.Marshal(name)
		hadModel := fl.Model != nil
		out := AppendForUpstream(nil, body, &fl, modelJSON)
		want := AppendWithoutSessionID(nil, body, &fl)
		var after Fields
		if err := Peek(out, &after); err != nil || after.HasSessionID() {
			t.Fatalf("Peek of %q (from %q): %v, session_id %v", out, body, err, after.HasSessionID())
		}
		if !hadModel {
			if !bytes.Equal(out, want) {
				t.Fatalf("a body without model changed: %q -> %q", want, out)
			}
			return
		}
		if utf8.ValidString(name) && string(after.Model) != name {
			t.Fatalf("model of %q is %q, want %q", out, after.Model, name)
		}
		// Putting the original value back gives the session_id cut alone, byte for byte.
		back := append(append(append([]byte(nil), out[:after.model.start]...), fl.model.of(body)...), out[after.model.end:]...)
		if !bytes.Equal(back, want) {
			t.Fatalf("AppendForUpstream(%q) = %q changes more than the model", body, out)
		}
	})
}
