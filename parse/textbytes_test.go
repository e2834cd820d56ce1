package parse

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestTextCounter(t *testing.T) {
	f := func(name string, responses bool, stream string, want int64) {
		t.Helper()
		var c TextCounter
		c.Reset(responses)
		c.Feed([]byte(stream))
		if got := c.Bytes(); got != want {
			t.Fatalf("%s: %d bytes of text, want %d", name, got, want)
		}
		// Split inside a value (or anywhere but a key and its `":"`), the count is the same.
		for i := range len(stream) {
			if k := strings.LastIndex(stream[:i], `"`); k >= 0 && strings.HasPrefix(stream[k:], `":"`) && i <= k+3 {
				continue // the split cuts a `":"`
			}
			if inKey(stream, i) {
				continue
			}
			c.Reset(responses)
			c.Feed([]byte(stream[:i]))
			c.Feed([]byte(stream[i:]))
			if got := c.Bytes(); got != want {
				t.Fatalf("%s split at %d (%q): %d bytes of text, want %d", name, i, stream[max(0, i-8):i], got, want)
			}
		}
	}
	f("alpha", false, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[],\"usage\":{\"input_tokens\":5}}}\n\n"+
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, wor\"}}\n\n"+
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"a \\\"b\\\"\"}}\n\n"+
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": 1\"}}\n\n",
		10+7+9)
	f("beta", false, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}}]}\n\n"+
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi there\\n\"}}]}\n\n"+
		"data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
		10+6)
	f("gamma", false, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Héllo\"}],\"role\":\"model\"},\"index\":0}],\"modelVersion\":\"g\"}\r\n\r\n",
		6)
	f("responses", true, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"+
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"Hi\"}\n\n", 2)
	f("text in text", false, `data: {"text":"say \"text\":\"x\" please"}`+"\n\n", 25)
}

// inKey reports whether position i of s is inside a member's key, from its opening quote to
// the colon after it.
func inKey(s string, i int) bool {
	j := strings.IndexByte(s[i:], ':')
	if j < 0 {
		return false
	}
	k := strings.LastIndexAny(s[:i], "{,")
	return k >= 0 && !strings.ContainsAny(s[k+1:i+j], "{}[]")
}

// BenchmarkTextCounter counts the text of the simulator's golden streams,
// one Feed per event, as a relay reads them.
func BenchmarkTextCounter(b *testing.B) {
	for _, name := range []string{"alpha_messages", "beta_chat", "gamma_generate"} {
		sse, err := os.ReadFile("../bench/sim/testdata/" + name + ".sse")
		if err != nil {
			b.Fatal(err)
		}
		events := bytes.SplitAfter(sse, []byte("\n\n"))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sse)))
			var c TextCounter
			for b.Loop() {
				c.Reset(false)
				for _, ev := range events {
					c.Feed(ev)
				}
			}
		})
	}
}
