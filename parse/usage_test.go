package parse

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUsageScanner(t *testing.T) {
	f := func(name, stream string, want Usage) {
		t.Helper()
		// Whole, and fed one byte at a time: chunk boundaries never matter.
		for _, step := range []int{len(stream), 1, 7} {
			var s UsageScanner
			for i := 0; i < len(stream); i += step {
				s.Feed([]byte(stream[i:min(i+step, len(stream))]))
			}
			if got := s.Usage(); got != want {
				t.Fatalf("%s (chunks of %d): got %+v, want %+v", name, step, got, want)
			}
		}
	}
	f("beta chat", `{"id":"x","choices":[{"message":{"content":"the \"usage\":{\"prompt_tokens\":99}"}}],`+
		`"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":8,"audio_tokens":0}}}`,
		Usage{Input: 12, Output: 30, Cached: 4, Reasoning: 8, Found: true})
	f("beta chat stream", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"+
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n",
		Usage{Input: 5, Output: 7, Found: true})
	f("responses stream", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n"+
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":20,"+
		"\"input_tokens_details\":{\"cached_tokens\":16},\"output_tokens\":9,\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":29},"+
		"\"metadata\":{\"usage\":\"{not this}\"}}}\n\n",
		Usage{Input: 20, Output: 9, Cached: 16, Reasoning: 3, Found: true})
	f("alpha stream", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,"+
		"\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
		Usage{Input: 25, Output: 15, Cached: 10, Found: true})
	f("gamma", `{"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 6,`+
		` "cachedContentTokenCount": 2, "thoughtsTokenCount": 5, "totalTokenCount": 15},"modelVersion":"g"}`,
		Usage{Input: 4, Output: 6, Cached: 2, Reasoning: 5, Found: true})
	f("none", `{"usage":null,"x":"usage","usageX":{"input_tokens":1},"y":{"usag":{"input_tokens":2}}}`, Usage{})
	f("too large", `{"usage":{"input_tokens":1,"pad":"`+strings.Repeat("x", maxUsageObject)+`"}}`, Usage{})
	obj := `{"input_tokens":1,"pad":"` + strings.Repeat("x", maxUsageObject) + `"}`
	obj = obj[:maxUsageObject-2] + `"}` // exactly the bound
	f("at the bound", `{"usage":`+obj+`}`, Usage{Input: 1, Found: true})
	f("a byte over", `{"usage":`+obj[:maxUsageObject-2]+`x"}}`, Usage{})
}

func FuzzUsageScanner(f *testing.F) {
	f.Add([]byte(`{"usage":{"input_tokens":1,"output_tokens":2}}`), uint8(3))
	f.Add([]byte(`data: {"usageMetadata": {"promptTokenCount": 4}}`), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		var whole, parts UsageScanner
		whole.Feed(b)
		n := int(step) + 1
		for i := 0; i < len(b); i += n {
			parts.Feed(b[i:min(i+n, len(b))])
		}
		if whole.Usage() != parts.Usage() {
			t.Fatalf("chunking changed the result: %+v vs %+v", whole.Usage(), parts.Usage())
		}
		u := whole.Usage()
		if u.Input < 0 || u.Output < 0 || u.Cached < 0 || u.Reasoning < 0 {
			t.Fatalf("negative count: %+v", u)
		}
	})
}

func BenchmarkUsageScanner(b *testing.B) {
	stream := []byte(strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"hello there\"}}],\"usage\":null}\n\n", 20) +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n")
	benchScan(b, stream)
}

// benchScan measures UsageScanner over body, fed whole.
func benchScan(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var s UsageScanner
	for b.Loop() {
		s.Reset()
		s.Feed(body)
	}
}

// BenchmarkUsageScannerChatStream scans a beta chat stream as providers send
// it: every chunk a JSON object of a dozen members, "usage":null in each when
// the client asked for usage, the counts in the last.
func BenchmarkUsageScannerChatStream(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,` +
		`"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4691090a87","choices":[{"index":0,` +
		`"delta":{"content":" the quick brown fox"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	stream := []byte(strings.Repeat(chunk, 20) + `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","choices":[],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0,` +
		`"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}}` + "\n\ndata: [DONE]\n\n")
	benchScan(b, stream)
}

// BenchmarkUsageScannerChatStreamNoUsage scans a beta chat stream whose
// client did not ask for usage: no chunk names it, and every byte is looked
// through.
func BenchmarkUsageScannerChatStreamNoUsage(b *testing.B) {
	var stream strings.Builder
	for i := range 20 {
		stream.WriteString(`data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,` +
			`"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4691090a87","choices":[{"index":0,` +
			`"delta":{"content":"` + strings.Repeat(" the quick brown fox jumps over the lazy dog", i%3) + `"},"logprobs":null,` +
			`"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString("data: [DONE]\n\n")
	benchScan(b, []byte(stream.String()))
}

// BenchmarkUsageScannerChatAnswer scans a beta chat completion read whole,
// whose usage object, with its details, comes last.
func BenchmarkUsageScannerChatAnswer(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,` +
		`"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12) + `","refusal":null,"annotations":[]},` +
		`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,` +
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,` +
		`"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default",` +
		`"system_fingerprint":"fp_fc9f1d7035"}`)
	benchScan(b, answer)
}

// A scanner holds a capture buffer only while it captures an object: a
// stream that waits between events holds none.
func TestUsageScannerHoldsNoBufferBetweenObjects(t *testing.T) {
	var s UsageScanner
	s.Feed([]byte(`data: {"id":"x","usage":{"prompt_tokens":3,`))
	if s.obj == nil {
		t.Fatal("no buffer in the middle of a usage object")
	}
	s.Feed([]byte(`"completion_tokens":5}}` + "\n\n"))
	if s.obj != nil {
		t.Fatal("the buffer is still held after the object ended")
	}
	if u := s.Usage(); u.Input != 3 || u.Output != 5 {
		t.Fatalf("usage %+v", u)
	}
	s.Feed([]byte(`{"usage":{"input_tokens":`))
	s.Reset()
	if s.obj != nil {
		t.Fatal("Reset kept the buffer")
	}
	s.Feed([]byte(`{"usage":{` + strings.Repeat(`"x":1,`, maxUsageObject/6+1)))
	if s.obj != nil {
		t.Fatal("the buffer is still held after an object too large for usage")
	}
}

// indexUsageWord finds what bytes.Index finds, in inputs of every length
// made of the word's bytes.
func TestIndexUsageWord(t *testing.T) {
	fill := []byte("usage\"gx")
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 48 {
		for range 400 {
			p := make([]byte, n)
			for i := range p {
				p[i] = fill[r.IntN(len(fill))]
			}
			if n >= len(usageWord) && r.IntN(2) == 0 {
				copy(p[r.IntN(n-len(usageWord)+1):], usageWord)
			}
			if got, want := indexUsageWord(p), bytes.Index(p, usageWord); got != want {
				t.Fatalf("indexUsageWord(%q) = %d, bytes.Index %d", p, got, want)
			}
		}
	}
}

func FuzzIndexUsageWord(f *testing.F) {
	f.Add([]byte(`{"id":"x","usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := indexUsageWord(p), bytes.Index(p, usageWord); got != want {
			t.Fatalf("indexUsageWord(%q) = %d, bytes.Index %d", p, got, want)
		}
	})
}
