package parse

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

// Why Peek is a scanner of its own and not fastjson (see the package doc):
// these tests hold the behaviours that choice rests on, and the benchmarks
// below give its figures.

// fastjson leaves strings unchecked until they are read, takes the first of
// duplicate keys where encoding/json (and the providers) take the last, and
// stops at 300 levels of nesting; Peek validates every string in its one
// pass and nests as deep as encoding/json.
func TestPeekAgainstFastjson(t *testing.T) {
	var p fastjson.Parser
	var fl Fields
	for _, body := range []string{`{"model":"a\x"}`, "{\"model\":\"a\x01\"}"} {
		if _, err := p.Parse(body); err != nil {
			t.Fatalf("fastjson now refuses %q: %v", body, err)
		}
		if Peek([]byte(body), &fl) == nil || json.Unmarshal([]byte(body), new(any)) == nil {
			t.Fatalf("%q accepted by Peek or encoding/json", body)
		}
	}
	dup := `{"model":"first","model":"last"}`
	v, err := p.Parse(dup)
	var m struct{ Model string }
	if err != nil || string(v.GetStringBytes("model")) != "first" || json.Unmarshal([]byte(dup), &m) != nil || m.Model != "last" {
		t.Fatalf("duplicate key: fastjson %q, encoding/json %q", v.GetStringBytes("model"), m.Model)
	}
	deep := `{"model":"m","x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	if _, err := p.Parse(deep); err == nil {
		t.Fatal("fastjson now nests 1000 levels")
	}
	if err := Peek([]byte(deep), &fl); err != nil || json.Unmarshal([]byte(deep), new(any)) != nil {
		t.Fatalf("1000 levels refused: %v", err)
	}
}

// bigChatBody is a chat body of about 1 MiB made of many small messages,
// as a long conversation is.
func bigChatBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"model-x","session_id":"s-1","stream":true,"messages":[`)
	for i := 0; b.Len() < 1<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":[{"type":"text","text":"hello there"}]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkPeekVsFastjson reads the routing fields of a small chat body and
// of a 1 MiB one with Peek and with a warm fastjson.Parser.
func BenchmarkPeekVsFastjson(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{{"chat", []byte(chatBody)}, {"1MiB", bigChatBody()}} {
		b.Run("peek/"+body.name, func(b *testing.B) {
			var fl Fields
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if err := Peek(body.b, &fl); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("fastjson/"+body.name, func(b *testing.B) {
			var p fastjson.Parser
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				v, err := p.ParseBytes(body.b)
				if err != nil {
					b.Fatal(err)
				}
				_ = v.GetStringBytes("model")
				_ = v.GetStringBytes("session_id")
				_ = v.GetBool("stream")
			}
		})
	}
}

// BenchmarkRetainedAfter1MiB reports the heap a warm reader keeps after it
// has read a 1 MiB body (retained-MiB): what a pooled reader per connection
// or per request would hold between requests.
func BenchmarkRetainedAfter1MiB(b *testing.B) {
	body := bigChatBody()
	retained := func(b *testing.B, read func() any) {
		var kept any
		var sum uint64
		for b.Loop() {
			before := heapAfterGC()
			kept = read()
			if after := heapAfterGC(); after > before {
				sum += after - before
			}
			runtime.KeepAlive(kept)
		}
		b.ReportMetric(float64(sum)/float64(b.N)/(1<<20), "retained-MiB")
	}
	b.Run("peek", func(b *testing.B) {
		retained(b, func() any {
			fl := new(Fields)
			if err := Peek(body, fl); err != nil {
				b.Fatal(err)
			}
			return fl
		})
	})
	b.Run("fastjson", func(b *testing.B) {
		retained(b, func() any {
			p := new(fastjson.Parser)
			if _, err := p.ParseBytes(body); err != nil {
				b.Fatal(err)
			}
			return p
		})
	})
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
