//go:build !race

package parse

import (
	"testing"
)

func TestPeekAllocs(t *testing.T) {
	f := func(body string) {
		t.Helper()
		b := []byte(body)
		var fl Fields
		if err := Peek(b, &fl); err != nil { // warms f's buffers
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = Peek(b, &fl) }); n != 0 {
			t.Fatalf("Peek(%q) allocates %v times per run", body, n)
		}
	}
	f(chatBody)
	f(`{"model":"m\u00e9","session_id":"s\"\ud83d\ude00","previous_response_id":"r\/1","stream":true}`)
	f(`{"model":"m","store":false,"prompt":"a \"cat\"","size":"1024x1024"}`)
	f(`{"mod\u0065l":"m","session\u005fid":null,"stream\u005foptions":{"include_usage":false},"\u017ftop":1,"x":[[[[{"y":[1,2,{"z":"w"}]}]]]]}`)
}

func TestAppendWithoutSessionIDAllocs(t *testing.T) {
	body := []byte(chatBody)
	var fl Fields
	if err := Peek(body, &fl); err != nil || !fl.HasSessionID() {
		t.Fatalf("%v %v", err, fl.HasSessionID())
	}
	dst := make([]byte, 0, len(body))
	if n := testing.AllocsPerRun(100, func() { dst = AppendWithoutSessionID(dst[:0], body, &fl) }); n != 0 {
		t.Fatalf("AppendWithoutSessionID allocates %v times per run", n)
	}
}

func TestMemberAllocs(t *testing.T) {
	data := []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","output":[{"x":"}"}]}}`)
	n := testing.AllocsPerRun(100, func() {
		if string(Member(Member(data, "response"), "\u0069d")) != `"resp_1"` {
			t.Fatal("wrong member")
		}
	})
	if n != 0 {
		t.Fatalf("Member allocates %v times per run", n)
	}
}

func TestUnescapeAllocs(t *testing.T) {
	raw := []byte(`"a\nb\u00e9\ud83d\ude00"`)
	dst := make([]byte, 0, 64)
	n := testing.AllocsPerRun(100, func() {
		dst, _ = AppendUnescaped(dst[:0], raw)
		_, _ = StringValue(dst[:0], raw)
		_, _ = StringValue(nil, []byte(`"plain"`))
	})
	if n != 0 {
		t.Fatalf("unescaping allocates %v times per run", n)
	}
}

func TestScannerAllocs(t *testing.T) {
	stream := []byte(sseStream)
	s := NewScanner(4096)
	run := func() {
		s.Reset(4096)
		for _, c := range chunksOf(stream, 100) {
			s.Feed(c)
			for {
				_, ok, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
			}
		}
	}
	run()
	chunks := chunksOf(stream, 100) // chunksOf allocates: cut once, outside the measured runs
	n := testing.AllocsPerRun(100, func() {
		s.Reset(4096)
		events := 0
		for _, c := range chunks {
			s.Feed(c)
			for {
				_, ok, _ := s.Next()
				if !ok {
					break
				}
				events++
			}
		}
		if events != 20 {
			t.Fatalf("%d events", events)
		}
	})
	if n != 0 {
		t.Fatalf("Scanner allocates %v times per run", n)
	}
}

func TestSplitterAllocs(t *testing.T) {
	stream := []byte("data: a\r\n\r\nevent: x\rdata: b\r\r: c\n\n")
	chunks := chunksOf(stream, 7)
	var s Splitter
	n := testing.AllocsPerRun(100, func() {
		s.Reset()
		for _, c := range chunks {
			s.Feed(c)
			for {
				if _, _, ok := s.Next(); !ok {
					break
				}
			}
		}
	})
	if n != 0 {
		t.Fatalf("Splitter allocates %v times per stream", n)
	}
}

func TestAppendAskingUsageAllocs(t *testing.T) {
	body := []byte(`{"model":"m","session_id":"s","stream":true,"stream_options":{"include_usage":false},"messages":[]}`)
	var fl Fields
	if err := Peek(body, &fl); err != nil || !fl.CanAskUsage() {
		t.Fatalf("%v %v", err, fl.CanAskUsage())
	}
	dst := make([]byte, 0, 2*len(body))
	if n := testing.AllocsPerRun(100, func() { dst = AppendAskingUsage(dst[:0], body, &fl, []byte(`"p"`)) }); n != 0 {
		t.Fatalf("AppendAskingUsage allocates %v times per run", n)
	}
	ev := []byte(chunkWithNull + usageChunk)
	dst = make([]byte, 0, len(ev))
	if n := testing.AllocsPerRun(100, func() {
		_ = IsAddedUsageEvent(ev)
		_ = AppendWithoutUsageNull(dst[:0], ev)
	}); n != 0 {
		t.Fatalf("IsAddedUsageEvent and AppendWithoutUsageNull allocate %v times per run", n)
	}
}
