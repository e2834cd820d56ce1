package parse

import (
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

func BenchmarkPeek(b *testing.B) {
	body := []byte(chatBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		var fl Fields
		for pb.Next() {
			if err := Peek(body, &fl); err != nil || !fl.Stream {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPeekSerial(b *testing.B) {
	body := []byte(chatBody)
	var fl Fields
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := Peek(body, &fl); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeekFastjson is a point of comparison: a pooled fastjson.Parser that parses the
// same body and reads the same fields (without the splice spans or the key unescaping).
func BenchmarkPeekFastjson(b *testing.B) {
	body := []byte(chatBody)
	var p fastjson.Parser
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		v, err := p.ParseBytes(body)
		if err != nil {
			b.Fatal(err)
		}
		_ = v.GetStringBytes("model")
		_ = v.GetStringBytes("session_id")
		_ = v.GetStringBytes("previous_response_id")
		_ = v.GetBool("stream")
	}
}

func BenchmarkAppendWithoutSessionID(b *testing.B) {
	body := []byte(chatBody)
	var fl Fields
	if err := Peek(body, &fl); err != nil || !fl.HasSessionID() {
		b.Fatal(err)
	}
	dst := make([]byte, 0, len(body))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		dst = AppendWithoutSessionID(dst[:0], body, &fl)
	}
}

func BenchmarkPeekAndSplice(b *testing.B) {
	body := []byte(chatBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		var fl Fields
		dst := make([]byte, 0, len(body))
		for pb.Next() {
			if err := Peek(body, &fl); err != nil {
				b.Fatal(err)
			}
			dst = AppendWithoutSessionID(dst[:0], body, &fl)
		}
	})
}

func BenchmarkMember(b *testing.B) {
	data := []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"in_progress","model":"model-x","output":[],"previous_response_id":null}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if Member(Member(data, "response"), "id") == nil {
			b.Fatal("no id")
		}
	}
}

func benchmarkScanner(b *testing.B, chunk int) {
	stream := []byte(sseStream)
	chunks := chunksOf(stream, chunk)
	s := NewScanner(64 << 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		s.Reset(64 << 10)
		events := 0
		for _, c := range chunks {
			s.Feed(c)
			for {
				_, ok, err := s.Next()
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					break
				}
				events++
			}
		}
		if events != 20 {
			b.Fatalf("%d events", events)
		}
	}
}

// BenchmarkScanner scans a 20-event Responses stream fed whole, and in 256- and 64-byte reads.
func BenchmarkScanner(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchmarkScanner(b, 1<<20) })
	b.Run("chunks256", func(b *testing.B) { benchmarkScanner(b, 256) })
	b.Run("chunks64", func(b *testing.B) { benchmarkScanner(b, 64) })
}

// BenchmarkStoreAndPrompt compares finding "store" (Responses create) and "prompt" (images)
// in the peek's one pass with the second walk over the body that Member made before (one
// walk per handler: each read one of the two).
func BenchmarkStoreAndPrompt(b *testing.B) {
	small := []byte(`{"store":false,"prompt":"a cat",` + chatBody[1:])
	large := []byte(`{"model":"model-x","store":false,"prompt":"a cat","input":[` +
		strings.Repeat(`{"role":"user","content":"`+strings.Repeat("x", 1000)+`"},`, 64) + `{}]}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", small}, {"64KiB", large}} {
		b.Run(bc.name+"/one-pass", func(b *testing.B) {
			var fl Fields
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if err := Peek(bc.body, &fl); err != nil || !fl.NoStore || fl.RawPrompt == nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/peek+member", func(b *testing.B) {
			var fl Fields
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if err := Peek(bc.body, &fl); err != nil || string(Member(bc.body, "store")) != "false" {
					b.Fatal(err)
				}
			}
		})
	}
}
