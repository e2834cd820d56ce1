package upstream

import (
	"os"
	"testing"

	"github.com/modelgate/gateway/proxy/family"
)

func TestEventHeadsJudgesStreamEnds(t *testing.T) {
	f := func(file string, fam family.Family, responses bool) {
		t.Helper()
		stream, err := os.ReadFile("../../parse/testdata/sse/" + file)
		if err != nil {
			t.Fatal(err)
		}
		// Whole, split at every offset: ended.
		for cut := 0; cut <= len(stream); cut++ {
			var h eventHeads
			h.feed(stream[:cut])
			h.feed(stream[cut:])
			if !h.ended(fam, responses) || h.midEvent() {
				t.Fatalf("%s split at %d: not judged ended", file, cut)
			}
		}
		// Cut anywhere before its final event: not ended, or mid-event.
		for cut := 0; cut < len(stream)-1; cut++ {
			var h eventHeads
			h.feed(stream[:cut])
			if h.ended(fam, responses) && !h.midEvent() && lastEventStart(stream) >= cut {
				t.Fatalf("%s cut at %d of %d: judged ended", file, cut, len(stream))
			}
		}
	}
	f("alpha_messages.sse", family.Alpha, false)
	f("beta_chat.sse", family.Beta, false)
	f("beta_responses.sse", family.Beta, true)
}

// lastEventStart is the offset where the final event of a well-formed stream begins.
func lastEventStart(s []byte) int {
	end := len(s)
	for end > 0 && (s[end-1] == '\n' || s[end-1] == '\r') {
		end--
	}
	for i := end - 1; i > 0; i-- {
		if s[i] == '\n' && (s[i-1] == '\n' || i > 1 && s[i-1] == '\r' && s[i-2] == '\n') {
			return i + 1
		}
	}
	return 0
}
