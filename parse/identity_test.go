package parse

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var (
	chatKeys      = IdentityKeys{ID: "id", Model: "model"}
	responsesKeys = IdentityKeys{In: "response", ID: "id", Model: "model"}
	messagesKeys  = IdentityKeys{In: "message", ID: "id", Model: "model"}
	gammaKeys     = IdentityKeys{ID: "responseId", Model: "modelVersion"}
)

// scanIdentity feeds stream to a scanner in the given pieces.
func scanIdentity(keys IdentityKeys, pieces [][]byte) (id, model string) {
	var s IdentityScanner
	s.Reset(keys)
	for _, p := range pieces {
		s.Feed(p)
	}
	i, m := s.Identity()
	return string(i), string(m)
}

func TestIdentityScanner(t *testing.T) {
	f := func(name string, keys IdentityKeys, stream, wantID, wantModel string) {
		t.Helper()
		if id, model := scanIdentity(keys, [][]byte{[]byte(stream)}); id != wantID || model != wantModel {
			t.Fatalf("%s: id %q model %q, want %q %q", name, id, model, wantID, wantModel)
		}
		for cut := range len(stream) + 1 { // the same at any chunk boundary
			id, model := scanIdentity(keys, [][]byte{[]byte(stream[:cut]), []byte(stream[cut:])})
			if id != wantID || model != wantModel {
				t.Fatalf("%s cut at %d: id %q model %q, want %q %q", name, cut, id, model, wantID, wantModel)
			}
		}
	}
	f("chat", chatKeys, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n"+
		`data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-y","choices":[]}`+"\n\ndata: [DONE]\n\n", "chatcmpl-1", "gpt-x")
	f("chat with a tool call first", chatKeys, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function"}]}}],"id":"chatcmpl-3","model":"gpt-x"}`+"\n\n", "chatcmpl-3", "gpt-x")
	f("chat with an empty first chunk", chatKeys, `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[]}`+"\n\n"+
		`data: {"id":"chatcmpl-4","model":"gpt-x","choices":[]}`+"\n\n", "chatcmpl-4", "gpt-x")
	f("chat, CRLF and a comment", chatKeys, ": keep-alive {\"id\":\"no\"}\r\n\r\ndata:{\"id\" : \"chatcmpl-5\" , \"model\" :\"gpt-x\"}\r\n\r\n", "chatcmpl-5", "gpt-x")
	f("responses", responsesKeys, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"instructions\":\"say \\\"id\\\": \\\"x\\\"\",\"metadata\":{\"id\":\"m\",\"model\":\"m\"},\"model\":\"gpt-x-2025\",\"tools\":[{\"id\":\"t\"}]}}\n\n"+
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\"}}\n\n", "resp_1", "gpt-x-2025")
	f("responses: an event's top-level id is not the response's", responsesKeys, "data: {\"id\":\"evt\",\"model\":\"evt\",\"type\":\"response.created\",\"response\":{\"model\":\"gpt-x\",\"id\":\"resp_2\"}}\n\n", "resp_2", "gpt-x")
	f("messages", messagesKeys, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":1}}}\n\n"+
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\"}}\n\n", "msg_01", "claude-x")
	f("gamma", gammaKeys, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a \\\"responseId\\\":\\\"x\\\"\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3},\"modelVersion\":\"gemini-x\",\"responseId\":\"r-1\"}\r\n\r\n"+
		"data: {\"candidates\":[],\"modelVersion\":\"gemini-y\",\"responseId\":\"r-2\"}\r\n\r\n", "r-1", "gemini-x")
	f("escapes decoded", chatKeys, `data: {"id":"a\/b\u00e9","model":"m\"1"}`+"\n\n", "a/b\u00e9", `m"1`)
	f("an invalid escape is not taken", chatKeys, `data: {"id":"a\x","model":"m"}`+"\n\n", "", "m")
	long := strings.Repeat("x", MaxIdentity)
	f("a value at the bound", chatKeys, `data: {"id":"`+long+`","model":"m"}`+"\n\n", long, "m")
	f("a value past the bound is not taken", chatKeys, `data: {"id":"`+long+`y","model":"m"}`+"\n\n", "", "m")
	f("only the first event that carries them", chatKeys, "data: {\"id\":\"c1\"}\n\ndata: {\"id\":\"c2\",\"model\":\"late\"}\n\n", "c1", "")
	f("not data", chatKeys, "event: {\"id\":\"x\",\"model\":\"y\"}\n\n", "", "")
	f("nothing in the first events", chatKeys, strings.Repeat("data: {\"x\":1}\n\n", maxIdentityEvents)+`data: {"id":"c","model":"m"}`+"\n\n", "", "")
	f("a line end in a string breaks the event", messagesKeys, "data: {\"message\":{\"id\":\"0\ndata: 1\",\"model\":\"m\"}}\n\n", "", "")
	f("the event after a broken one is read", chatKeys, "data: {\"x\":\"a\ndata: b\"}\n\ndata: {\"id\":\"c\",\"model\":\"m\"}\n\n", "c", "m")
	f("an unfinished event still gives", gammaKeys, `data: {"responseId":"r","modelVersion":"g"`, "r", "g")
}

func TestIdentityScannerStops(t *testing.T) {
	var s IdentityScanner
	s.Reset(chatKeys)
	s.Feed([]byte(`data: {"id":"c","model":"m"}` + "\n\n"))
	if !s.Done() {
		t.Fatal("not done after the event that carried both")
	}
	s.Reset(chatKeys)
	s.Feed([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", maxIdentityBytes) + "\"}}]"))
	if !s.Done() {
		t.Fatal("not done past the byte bound")
	}
}

// FuzzIdentityScanner checks that the scanner never panics, gives the same at
// any chunk boundaries as for the whole stream, and only values it was sent.
func FuzzIdentityScanner(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\"}}\n\n"), uint64(1), uint8(2))
	f.Add([]byte(`data: {"id":"c\u00e9","model":"m"}`+"\r\n\r\n"), uint64(2), uint8(0))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64, k uint8) {
		keys := []IdentityKeys{chatKeys, responsesKeys, messagesKeys, gammaKeys}[int(k)%4]
		id, model := scanIdentity(keys, [][]byte{stream})
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		cuts := make([]int, rng.IntN(min(len(stream), 64)+1))
		for i := range cuts {
			cuts[i] = rng.IntN(len(stream) + 1)
		}
		slices.Sort(cuts)
		if id2, model2 := scanIdentity(keys, splitAt(stream, cuts...)); id2 != id || model2 != model {
			t.Fatalf("stream %q: whole %q %q, cut at %v %q %q", stream, id, model, cuts, id2, model2)
		}
		for _, v := range []string{id, model} {
			if len(v) > MaxIdentity {
				t.Fatalf("stream %q: %d bytes kept", stream, len(v))
			}
			if v != "" && !strings.Contains(string(stream), v) && !strings.Contains(string(stream), `\`) {
				t.Fatalf("stream %q: %q is not in it", stream, v)
			}
		}
	})
}

// BenchmarkIdentityScanner reads the id and model of a Responses stream whose
// response.created echoes 4 KiB of instructions before its model, as a
// traced stream's relay does once per stream.
func BenchmarkIdentityScanner(b *testing.B) {
	stream := []byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"instructions\":\"" +
		strings.Repeat("be brief. ", 410) + "\",\"model\":\"gpt-x-2025\",\"tools\":[]}}\n\n")
	var s IdentityScanner
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		s.Reset(responsesKeys)
		s.Feed(stream)
	}
	if id, model := s.Identity(); string(id) != "resp_1" || string(model) != "gpt-x-2025" {
		b.Fatalf("id %q model %q", id, model)
	}
}
