package upstream

import (
	"bytes"
	"os"
	"strconv"
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
