package upstream

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
)

func TestEventHeadsJudgesStreamEnds(t *testing.T) {
	f := func(file string, fam family.Family, responses bool) {
		t.Helper()
		raw, err := os.ReadFile("../../parse/testdata/sse/" + file)
		if err != nil {
			t.Fatal(err)
		}
		lf := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
		// The same stream with every line end an SSE stream may use.
		for _, eol := range []string{"\n", "\r\n", "\r"} {
			stream := bytes.ReplaceAll(lf, []byte("\n"), []byte(eol))
			judge(t, file+" "+strconv.Quote(eol), stream, fam, responses)
		}
	}
	f("alpha_messages.sse", family.Alpha, false)
	f("beta_chat.sse", family.Beta, false)
	f("beta_responses.sse", family.Beta, true)
}

// judge checks that stream is judged ended whole, however it is split, and
// not ended when cut anywhere before its final event.
func judge(t *testing.T, name string, stream []byte, fam family.Family, responses bool) {
	t.Helper()
	for cut := 0; cut <= len(stream); cut++ {
		var h eventHeads
		h.feed(stream[:cut])
		h.feed(stream[cut:])
		if !h.ended(fam, responses) || h.midEvent() {
			t.Fatalf("%s split at %d: not judged ended", name, cut)
		}
	}
	last := lastEventStart(stream)
	for cut := 0; cut < len(stream)-1; cut++ {
		var h eventHeads
		h.feed(stream[:cut])
		if h.ended(fam, responses) && !h.midEvent() && last >= cut {
			t.Fatalf("%s cut at %d of %d: judged ended", name, cut, len(stream))
		}
	}
}

// lastEventStart is the offset where the final event of a well-formed stream
// begins: the end of the last blank line before its own.
func lastEventStart(s []byte) int {
	end := len(s)
	for end > 0 && (s[end-1] == '\n' || s[end-1] == '\r') {
		end--
	}
	return parse.LastEventEnd(s[:end])
}

// FuzzEventHeads checks the event-at-a-time path against the line splitter
// alone (a stream that has had a '\r' takes only the latter): however a
// stream is cut into chunks, after every chunk both hold the same heads and
// agree on whether the stream stopped inside an event.
func FuzzEventHeads(f *testing.F) {
	for _, file := range []string{"alpha_messages.sse", "beta_chat.sse", "beta_responses.sse"} {
		raw, err := os.ReadFile("../../parse/testdata/sse/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, uint64(7))
		f.Add(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), uint64(1<<40+13))
	}
	f.Add([]byte("\n\ndata: a\n\n\n\nevent: x\ndata: "+strings.Repeat("y", 50)+"\n\ndata: [DONE]\n\n"), uint64(3))
	f.Add([]byte("data: a\ndata: b\n\ndata: c\r\n\r\ndata: [DONE]\n\n"), uint64(5))
	f.Fuzz(func(t *testing.T, stream []byte, cuts uint64) {
		var got eventHeads
		want := eventHeads{cr: true}
		for len(stream) > 0 {
			n := 1 + int(cuts%97)
			cuts = cuts/97 + cuts%97*7919 // a different cut each time
			n = min(n*(1+int(cuts%5)*40), len(stream))
			got.feed(stream[:n])
			want.feed(stream[:n])
			stream = stream[n:]
			if string(got.cur[:got.curN]) != string(want.cur[:want.curN]) ||
				string(got.last[:got.lastN]) != string(want.last[:want.lastN]) ||
				got.midEvent() != want.midEvent() {
				t.Fatalf("after %q: heads %q/%q, mid-event %v; the splitter's %q/%q, %v",
					stream, got.cur[:got.curN], got.last[:got.lastN], got.midEvent(),
					want.cur[:want.curN], want.last[:want.lastN], want.midEvent())
			}
		}
	})
}

// BenchmarkEventHeads follows an alpha messages stream read in one chunk.
func BenchmarkEventHeads(b *testing.B) {
	raw, err := os.ReadFile("../../parse/testdata/sse/alpha_messages.sse")
	if err != nil {
		b.Fatal(err)
	}
	stream := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		var h eventHeads
		h.feed(stream)
		if !h.ended(family.Alpha, false) {
			b.Fatal("not ended")
		}
	}
}
