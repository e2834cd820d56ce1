package parse

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestMember(t *testing.T) {
	f := func(obj, key string, want []byte) {
		t.Helper()
		got := Member([]byte(obj), key)
		if (got == nil) != (want == nil) || string(got) != string(want) {
			t.Fatalf("Member(%q, %q) = %q; want %q", obj, key, got, want)
		}
		// for valid JSON objects, agree with encoding/json
		var m map[string]json.RawMessage
		if utf8.ValidString(obj) && json.Unmarshal([]byte(obj), &m) == nil && m != nil {
			if raw, ok := m[key]; string(raw) != string(got) || ok != (got != nil) {
				t.Fatalf("Member(%q, %q) = %q; encoding/json says %q", obj, key, got, raw)
			}
		}
	}
	b := func(s string) []byte { return []byte(s) }

	f(`{"id":"resp_1","object":"response"}`, "id", b(`"resp_1"`))
	f(`{"id":"resp_1","object":"response"}`, "object", b(`"response"`))
	f(` { "a" : 1 , "id" :	"x" } `, "id", b(`"x"`))
	f(`{"n":-1.5e3,"t":true,"z":null,"a":[1,{"b":"]"}],"o":{"k":"}"}}`, "n", b(`-1.5e3`))
	f(`{"n":-1.5e3,"t":true,"z":null,"a":[1,{"b":"]"}],"o":{"k":"}"}}`, "t", b(`true`))
	f(`{"n":-1.5e3,"t":true,"z":null,"a":[1,{"b":"]"}],"o":{"k":"}"}}`, "z", b(`null`))
	f(`{"n":-1.5e3,"t":true,"z":null,"a":[1,{"b":"]"}],"o":{"k":"}"}}`, "a", b(`[1,{"b":"]"}]`))
	f(`{"n":-1.5e3,"t":true,"z":null,"a":[1,{"b":"]"}],"o":{"k":"}"}}`, "o", b(`{"k":"}"}`))
	f(`{"o":{ "k" : [ ] }}`, "o", b(`{ "k" : [ ] }`))
	f(`{"x":"}\"{","id":"ok"}`, "id", b(`"ok"`))
	f(`{"x":"\\","id":"ok"}`, "id", b(`"ok"`))
	f(`{"x":"\\\"","id":"ok"}`, "id", b(`"ok"`))
	f(`{"id":"a","id":"b"}`, "id", b(`"b"`))
	f(`{"i\u0064":"esc"}`, "id", b(`"esc"`))
	f(`{"a\"b":1}`, `a"b`, b(`1`))
	f(`{"\ud83d\ude00":1}`, "😀", b(`1`))
	f(`{"é":1}`, "é", b(`1`))
	f(`{"":1}`, "", b(`1`))
	f(`{"a\nb":1}`, "a\nb", b(`1`))
	f(`{"a\u0041":1}`, "aA", b(`1`))

	// absent
	f(`{}`, "id", nil)
	f(`{"object":"response"}`, "id", nil)
	f(`{"response":{"id":"inner"}}`, "id", nil)
	f(`{"ids":1,"i":2,"Id":3}`, "id", nil)
	f(`{"i\u0064x":1}`, "id", nil)
	f(`{"a\nb":1}`, `a\nb`, nil) // the raw text of an escaped key is not the key
	f(`{"a\\b":1}`, `a\\b`, nil)
	f(`{"i\d":1}`, "id", nil)

	// not an object, or broken
	f(``, "id", nil)
	f(`[{"id":1}]`, "id", nil)
	f(`"id"`, "id", nil)
	f(`{"id":"x"`, "id", nil)
	f(`{"id":"x",`, "id", nil)
	f(`{"id":"x`, "id", nil)
	f(`{"id":{"a":1}`, "id", nil)
	f(`{"id":}`, "id", nil)
	f(`{"id" "x"}`, "id", nil)
	f(`{"id":"x" "y":1}`, "id", nil)
	f(`{id:"x"}`, "id", nil)

	// chained, as for a Responses SSE event
	data := []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_123","object":"response","output":[{"id":"msg_1"}]}}`)
	if got := Member(Member(data, "response"), "id"); string(got) != `"resp_123"` {
		t.Fatalf("chained Member = %q", got)
	}
	if got := Member(Member(data, "missing"), "id"); got != nil {
		t.Fatalf("chained Member of a missing object = %q", got)
	}
}
