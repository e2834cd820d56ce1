package parse

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

func TestAppendAskingUsage(t *testing.T) {
	f := func(body, model, want string, includes bool) {
		t.Helper()
		var fl Fields
		if err := Peek([]byte(body), &fl); err != nil {
			t.Fatalf("Peek(%q): %v", body, err)
		}
		if fl.IncludesUsage() != includes {
			t.Fatalf("IncludesUsage(%q) = %v, want %v", body, fl.IncludesUsage(), includes)
		}
		var modelJSON []byte
		if model != "" {
			modelJSON = []byte(model)
		}
		if got := AppendAskingUsage(nil, []byte(body), &fl, modelJSON); string(got) != want {
			t.Fatalf("AppendAskingUsage(%q)\n got %s\nwant %s", body, got, want)
		}
	}
	// no stream_options: added last, with or without a comma
	f(`{"model":"m","stream":true}`, "", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, false)
	f(`{"model":"m", "stream":true }`, "", `{"model":"m", "stream":true ,"stream_options":{"include_usage":true}}`, false)
	f(`{}`, "", `{"stream_options":{"include_usage":true}}`, false)
	f(`{ }`, "", `{ "stream_options":{"include_usage":true}}`, false)
	f(`{"session_id":"s"}`, "", `{"stream_options":{"include_usage":true}}`, false)
	f(`{"model":"m","session_id":"s"}`, "", `{"model":"m","stream_options":{"include_usage":true}}`, false)
	f(`{"session_id":"s","model":"m"}`, `"p"`, `{"model":"p","stream_options":{"include_usage":true}}`, false)
	// stream_options null, empty, with other members
	f(`{"stream":true,"stream_options":null,"model":"m"}`, `"p"`, `{"stream":true,"stream_options":{"include_usage":true},"model":"p"}`, false)
	f(`{"stream_options":{},"model":"m"}`, "", `{"stream_options":{"include_usage":true},"model":"m"}`, false)
	f(`{"stream_options":{ },"model":"m"}`, "", `{"stream_options":{"include_usage":true },"model":"m"}`, false)
	f(`{"model":"m","stream_options":{"include_obfuscation":false}}`, `"p"`,
		`{"model":"p","stream_options":{"include_usage":true,"include_obfuscation":false}}`, false)
	// include_usage false or null: set
	f(`{"stream_options":{"include_usage":false},"session_id":"s","model":"m"}`, "",
		`{"stream_options":{"include_usage":true},"model":"m"}`, false)
	f(`{"model":"m","stream_options":{"x":1, "include_usage" : null }}`, "", `{"model":"m","stream_options":{"x":1, "include_usage" : true }}`, false)
	f(`{"model":"m","stream_options":{"include\u005fusage":false}}`, "", `{"model":"m","stream_options":{"include\u005fusage":true}}`, false)
	// already true, or types the provider refuses: no edit, only the others
	f(`{"model":"m","stream_options":{"include_usage":true},"session_id":"s"}`, `"p"`, `{"model":"p","stream_options":{"include_usage":true}}`, true)
	f(`{"model":"m","stream_options":{"include_usage":"yes"}}`, "", `{"model":"m","stream_options":{"include_usage":"yes"}}`, false)
	f(`{"model":"m","stream_options":[]}`, "", `{"model":"m","stream_options":[]}`, false)
	// include_usage inside another object is not stream_options'
	f(`{"model":"m","metadata":{"include_usage":true}}`, "", `{"model":"m","metadata":{"include_usage":true},"stream_options":{"include_usage":true}}`, false)
}

// FuzzAppendAskingUsage checks that the edit gives valid JSON that decodes to the body minus
// session_id, with the model replaced and stream_options.include_usage true when CanAskUsage,
// and that it changes nothing else: the same call without the usage edit is AppendForUpstream.
func FuzzAppendAskingUsage(f *testing.F) {
	f.Add([]byte(chatBody), "provider-model")
	f.Add([]byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false},"session_id":"s"}`), "")
	f.Add([]byte(`{"session_id":"s","stream_options":null}`), "p")
	f.Add([]byte(`{"stream_options":{ "a" : 1 }, "session_id":"s" , "model":"m"}`), "p")
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		var fl Fields
		if Peek(body, &fl) != nil {
			return
		}
		var modelJSON []byte
		if name != "" {
			modelJSON, _ = json.Marshal(name)
		}
		out := AppendAskingUsage(nil, body, &fl, modelJSON)
		if !fl.CanAskUsage() {
			if want := AppendForUpstream(nil, body, &fl, modelJSON); !bytes.Equal(out, want) {
				t.Fatalf("AppendAskingUsage(%q) = %q; without an edit AppendForUpstream gives %q", body, out, want)
			}
			return
		}
		var after Fields
		if err := Peek(out, &after); err != nil || after.HasSessionID() || !after.IncludesUsage() || after.CanAskUsage() {
			t.Fatalf("Peek of %q (from %q): %v; session_id %v, include_usage %v", out, body, err, after.HasSessionID(), after.IncludesUsage())
		}
		if !json.Valid(body) || !bytes.Equal(body, bytes.ToValidUTF8(body, nil)) {
			return // encoding/json would change the strings it decodes: compare on valid UTF-8 only
		}
		want := decodeMap(t, body)
		delete(want, "session_id")
		if _, ok := want["model"]; ok && modelJSON != nil {
			var m string
			_ = json.Unmarshal(modelJSON, &m)
			want["model"] = m
		}
		opts, _ := want["stream_options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["include_usage"] = true
		want["stream_options"] = opts
		if got := decodeMap(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("AppendAskingUsage(%q) = %q decodes to %v; want %v", body, out, got, want)
		}
	})
}

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("cannot decode %q: %v", b, err)
	}
	return m
}

// The events below are a beta chat stream's as the simulator and the provider send them.
const (
	chunkWithNull    = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkWithoutNull = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	usageChunk       = `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n"
)

func TestIsAddedUsageEvent(t *testing.T) {
	f := func(ev string, want bool) {
		t.Helper()
		if got := IsAddedUsageEvent([]byte(ev)); got != want {
			t.Fatalf("IsAddedUsageEvent(%q) = %v, want %v", ev, got, want)
		}
	}
	f(usageChunk, true)
	f(`data: {"choices" : [ ] , "usage" : {"prompt_tokens":1}}`+"\n\n", true)
	f(chunkWithNull, false)
	f(chunkWithoutNull, false)
	f("data: [DONE]\n\n", false)
	// an empty choices without usage (Azure's prompt_filter_results chunk), usage null
	f(`data: {"choices":[],"prompt_filter_results":[]}`+"\n\n", false)
	f(`data: {"choices":[],"usage":null}`+"\n\n", false)
	// the words inside a string value are escaped
	f(`data: {"choices":[{"delta":{"content":"\"choices\":[],\"usage\":{"}}]}`+"\n\n", false)
}

func TestAppendWithoutUsageNull(t *testing.T) {
	f := func(ev, want string) {
		t.Helper()
		b := []byte(ev)
		if got := AppendWithoutUsageNull(b[:0], b); string(got) != want {
			t.Fatalf("AppendWithoutUsageNull(%q) = %q, want %q", ev, got, want)
		}
	}
	f(chunkWithNull, chunkWithoutNull)
	f(chunkWithoutNull, chunkWithoutNull)
	f(usageChunk, usageChunk)
	f(`data: {"usage":null,"id":"c"}`, `data: {"id":"c"}`)
	f(`data: {"usage" : null , "id":"c"}`, `data: {"id":"c"}`)
	f(`data: {"usage":null}`, `data: {}`)
	f(`data: {"id":"c" , "usage":null }`, `data: {"id":"c"  }`)
	f(`data: {"id":"c","usage":null,"obfuscation":"x"}`, `data: {"id":"c","obfuscation":"x"}`)
	f(chunkWithNull+chunkWithNull, chunkWithoutNull+chunkWithoutNull)
	// not a member with a null value: left alone
	f(`data: {"content":"\"usage\":null","usage":{"a":1}}`, `data: {"content":"\"usage\":null","usage":{"a":1}}`)
	f(`data: {"usage":nullx`, `data: {"usage":nullx`)
	f(`data: "usage":null`, `data: "usage":null`)
}

// FuzzAppendWithoutUsageNull checks that taking the "usage":null members out
// keeps a JSON object valid and removes those members alone, as encoding/json
// reads it, and that IsAddedUsageEvent never panics.
func FuzzAppendWithoutUsageNull(f *testing.F) {
	f.Add([]byte(chunkWithNull))
	f.Add([]byte(`{"usage" : null ,"a":[{"usage":null},{"b":{"usage":null}}],"usage":{"x":null}}`))
	f.Add([]byte(`{"\"usage":null,"c":"\"usage\":null"}`))
	f.Fuzz(func(t *testing.T, ev []byte) {
		_ = IsAddedUsageEvent(ev)
		out := AppendWithoutUsageNull(nil, ev)
		c := slices.Clone(ev)
		inPlace := AppendWithoutUsageNull(c[:0], c)
		if !bytes.Equal(out, inPlace) {
			t.Fatalf("in place %q gives %q; apart %q", ev, inPlace, out)
		}
		if !json.Valid(ev) || duplicateKeys(ev) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("AppendWithoutUsageNull(%q) = %q, not JSON", ev, out)
		}
		var in, got any
		_ = json.Unmarshal(ev, &in)
		_ = json.Unmarshal(out, &got)
		if want := withoutUsageNull(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("AppendWithoutUsageNull(%q) = %q: %v; want %v", ev, out, got, want)
		}
	})
}

// withoutUsageNull deletes every "usage" member whose value is null from v.
func withoutUsageNull(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if u, ok := v["usage"]; ok && u == nil {
			delete(v, "usage")
		}
		for k, x := range v {
			v[k] = withoutUsageNull(x)
		}
	case []any:
		for i, x := range v {
			v[i] = withoutUsageNull(x)
		}
	}
	return v
}

// duplicateKeys reports whether an object in the valid JSON b has a key twice.
func duplicateKeys(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := d.Token()
		if err != nil {
			return true
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, _ := d.Token()
				if seen[k.(string)] || walk() {
					return true
				}
				seen[k.(string)] = true
			}
			_, _ = d.Token()
		case json.Delim('['):
			for d.More() {
				if walk() {
					return true
				}
			}
			_, _ = d.Token()
		}
		return false
	}
	return walk()
}
