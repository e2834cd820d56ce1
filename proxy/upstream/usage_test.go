package upstream

import (
	"strings"
	"testing"
)

const (
	chunkNull  = `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}` + "\n\n"
	chunkPlain = `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"
	chunkUsage = `data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n"
	chunkDone  = "data: [DONE]\n\n"
)

// filterWrites runs the strip over the writes as the relay makes them and
// returns what the client gets.
func filterWrites(writes ...string) string {
	s := usageStrip{on: true}
	var out strings.Builder
	for _, w := range writes {
		out.Write(s.filter([]byte(w)))
	}
	return out.String()
}

func TestUsageStrip(t *testing.T) {
	f := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("got\n%q\nwant\n%q", got, want)
		}
	}
	stream := chunkNull + chunkNull + chunkUsage + chunkDone
	want := chunkPlain + chunkPlain + chunkDone
	f(filterWrites(stream), want)
	f(filterWrites(chunkNull, chunkNull, chunkUsage, chunkDone), want)
	f(filterWrites(chunkNull+chunkNull, chunkUsage+chunkDone), want)
	// CRLF lines
	crlf := strings.ReplaceAll(stream, "\n", "\r\n")
	f(filterWrites(crlf), strings.ReplaceAll(want, "\n", "\r\n"))
	// An event larger than the relay's buffer comes in parts: they are passed,
	// with a usage:null that a part holds whole taken out; the events after
	// it are judged as ever.
	big := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 100) + `"}}],"usage":null}` + "\n\n"
	bigPlain := strings.Replace(big, `,"usage":null`, "", 1)
	f(filterWrites(big[:50], big[50:], chunkUsage+chunkDone), bigPlain+chunkDone)
	f(filterWrites(big[:50], big[50:]+chunkNull, chunkUsage, chunkDone), bigPlain+chunkPlain+chunkDone)
	// a part of the usage event (never so large) is passed, not judged
	f(filterWrites(chunkUsage[:30], chunkUsage[30:]), chunkUsage)
	// off: nothing changes
	var off usageStrip
	if got := string(off.filter([]byte(stream))); got != stream {
		t.Fatalf("off: %q", got)
	}
}

func TestEventLen(t *testing.T) {
	f := func(p string, n int, whole bool) {
		t.Helper()
		if gn, gw := eventLen([]byte(p)); gn != n || gw != whole {
			t.Fatalf("eventLen(%q) = %d %v, want %d %v", p, gn, gw, n, whole)
		}
	}
	f("data: x\n\ndata: y\n\n", 9, true)
	f("event: a\ndata: x\n\n", 18, true)
	f("data: x\r\n\r\nmore", 11, true)
	f("data: x\r\rmore", 9, true)
	f("\n", 1, true)
	f("data: x\n", 8, false)
	f("data: x", 7, false)
}
