package parse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// sseEvent is an Event copied out of the Scanner's buffers.
type sseEvent struct{ name, data string }

// scanChunks feeds chunks to s and returns the events and the error Next reported, if any.
func scanChunks(s *Scanner, chunks [][]byte) ([]sseEvent, error) {
	var evs []sseEvent
	for _, c := range chunks {
		s.Feed(c)
		for {
			ev, ok, err := s.Next()
			if err != nil {
				return evs, err
			}
			if !ok {
				break
			}
			evs = append(evs, sseEvent{string(ev.Name), string(ev.Data)})
		}
	}
	return evs, nil
}

// splitAt cuts stream at the given ascending offsets.
func splitAt(stream []byte, cuts ...int) [][]byte {
	var chunks [][]byte
	prev := 0
	for _, c := range cuts {
		chunks = append(chunks, stream[prev:c])
		prev = c
	}
	return append(chunks, stream[prev:])
}

// referenceEvents parses a whole stream the way the WHATWG EventSource specification words
// it, independently of Scanner, with no size limit.
func referenceEvents(stream string) []sseEvent {
	stream = strings.TrimPrefix(stream, "\uFEFF")
	stream = strings.ReplaceAll(stream, "\r\n", "\n")
	stream = strings.ReplaceAll(stream, "\r", "\n")
	lines := strings.Split(stream, "\n")
	lines = lines[:len(lines)-1] // an unfinished last line is never processed
	var evs []sseEvent
	var name, data strings.Builder
	for _, line := range lines {
		if line == "" {
			if data.Len() > 0 {
				evs = append(evs, sseEvent{name.String(), strings.TrimSuffix(data.String(), "\n")})
			}
			name.Reset()
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data.WriteString(value + "\n")
		case "event":
			name.Reset()
			name.WriteString(value)
		}
	}
	return evs
}

func TestScanner(t *testing.T) {
	f := func(stream string, want ...sseEvent) {
		t.Helper()
		if ref := referenceEvents(stream); fmt.Sprint(ref) != fmt.Sprint(want) {
			t.Fatalf("BUG in test: the reference parser gives %q for %q; the table says %q", ref, stream, want)
		}
		check := func(how string, chunks [][]byte) {
			t.Helper()
			got, err := scanChunks(NewScanner(0), chunks)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s %q: got %q, %v; want %q", how, stream, got, err, want)
			}
		}
		b := []byte(stream)
		check("whole", [][]byte{b})
		for i := 0; i <= len(b); i++ {
			check(fmt.Sprintf("cut at %d", i), splitAt(b, i))
		}
		var bytewise [][]byte
		for i := range b {
			bytewise = append(bytewise, b[i:i+1])
		}
		check("byte by byte", bytewise)
	}
	ev := func(name, data string) sseEvent { return sseEvent{name, data} }

	f("")
	f("data: x\n\n", ev("", "x"))
	f("event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
		ev("message_start", `{"type":"message_start"}`), ev("ping", `{"type": "ping"}`))
	f("data: {\"a\":1}\n\ndata: [DONE]\n\n", ev("", `{"a":1}`), ev("", "[DONE]"))

	// line ends
	f("data: a\r\n\r\ndata: b\r\rdata: c\n\n", ev("", "a"), ev("", "b"), ev("", "c"))
	f("event: e\r\ndata: 1\r\n\r\n", ev("e", "1"))
	f("data: a\r\n\rdata: b\n\r", ev("", "a"), ev("", "b"))

	// data lines are joined; one leading space goes
	f("data: a\ndata: b\ndata:c\n\n", ev("", "a\nb\nc"))
	f("data:  two\ndata:\ndata\n\n", ev("", " two\n\n"))
	f("data\n\n", ev("", ""))
	f("data:\n\n", ev("", ""))
	f("data: \n\n", ev("", ""))
	f("event: \ndata: \ndata: \n\n", ev("", "\n"))
	f("data: a:b: c\n\n", ev("", "a:b: c"))
	f("data: tab\t \n\n", ev("", "tab\t "))

	// comments, unknown fields, events without data
	f(": comment\ndata: x\n: another\n\n", ev("", "x"))
	f(":\n\n: keepalive\n\n")
	f("event: ping\n\ndata: y\n\n", ev("", "y"))
	f("id: 7\nretry: 100\nfoo: bar\ndata: z\n\n", ev("", "z"))
	f("Data: no\nDATA: no\n data: no\n\n")
	f("event: a\nevent: b\ndata: x\n\nevent\ndata: y\n\n", ev("b", "x"), ev("", "y"))

	// the event name does not leak into the next event
	f("event: one\ndata: 1\n\ndata: 2\n\n", ev("one", "1"), ev("", "2"))

	// an unfinished event is never reported
	f("data: x\n", []sseEvent{}...)
	f("data: x\n\ndata: y", ev("", "x"))
	f("data: x\n\ndata: y\n", ev("", "x"))

	// byte order mark: dropped once at the start only
	f("\uFEFFdata: x\n\n", ev("", "x"))
	f("\uFEFF\n\ndata: x\n\n", ev("", "x"))
	f("\xEF\xBBdata: x\n\n")
	f("\xEFdata: x\n\ndata: y\n\n", ev("", "y"))
	f("data: x\n\n\uFEFFdata: y\n\n", ev("", "x"))
	f("\uFEFF\uFEFFdata: y\n\n")

	// unicode and control bytes pass through
	f("data: 模型 \x00\x7f\n\n", ev("", "模型 \x00\x7f"))
}

func TestScannerMaxEvent(t *testing.T) {
	// The limit counts the bytes of an event's lines without their line ends.
	line := "data: " + strings.Repeat("x", 10) // 16 bytes
	stream := []byte(line + "\n\n" + line + "\n" + line + "\n\n")

	got, err := scanChunks(NewScanner(32), [][]byte{stream})
	if err != nil || len(got) != 2 {
		t.Fatalf("at the limit: %q, %v", got, err)
	}
	for i := 0; i <= len(stream); i++ {
		s := NewScanner(31)
		got, err := scanChunks(s, splitAt(stream, i))
		if !errors.Is(err, ErrEventTooLarge) || len(got) != 1 {
			t.Fatalf("over the limit, cut at %d: %q, %v", i, got, err)
		}
		// the error sticks until Reset
		s.Feed([]byte("data: ok\n\n"))
		if _, ok, err := s.Next(); ok || !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("after the error: ok %v, %v", ok, err)
		}
		s.Reset(31)
		if got, err := scanChunks(s, [][]byte{[]byte("data: ok\n\n")}); err != nil || len(got) != 1 {
			t.Fatalf("after Reset: %q, %v", got, err)
		}
	}
}

func TestScannerBounded(t *testing.T) {
	// A line that never ends, fed in chunks, fails once it passes the limit instead of growing.
	s := NewScanner(1024)
	chunk := []byte(strings.Repeat("x", 100))
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		s.Feed(chunk)
		_, _, err = s.Next()
	}
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("endless line: %v", err)
	}
	if cap(s.partial) > 2*1024 {
		t.Fatalf("the Scanner grew to %d bytes for a limit of 1024", cap(s.partial))
	}

	// Many data lines of one event are bounded too.
	s = NewScanner(1024)
	var stream []byte
	for len(stream) < 4096 {
		stream = append(stream, "data: yyyyyyyy\n"...)
	}
	if _, err := scanChunks(s, [][]byte{stream}); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("endless event: %v", err)
	}
	if cap(s.data) > 2*1024 {
		t.Fatalf("the Scanner grew to %d bytes for a limit of 1024", cap(s.data))
	}
}

// TestScannerLoneCRs scans a chunk of a million blank lines that end in a lone '\r', with the
// only '\n' at its end. It checks the result; it also stands guard against a scanner that
// looks for the next '\n' from every line start, which does about 5e11 byte comparisons here
// and makes this test take tens of seconds instead of milliseconds.
func TestScannerLoneCRs(t *testing.T) {
	chunk := []byte(strings.Repeat("\r", 1<<20) + "data: x\n\n")
	got, err := scanChunks(NewScanner(0), [][]byte{chunk})
	if err != nil || len(got) != 1 || got[0].data != "x" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestScannerZeroValue(t *testing.T) {
	var s Scanner
	got, err := scanChunks(&s, [][]byte{[]byte("event: e\ndata: x\n\n")})
	if err != nil || len(got) != 1 || got[0] != (sseEvent{"e", "x"}) {
		t.Fatalf("zero Scanner: %q, %v", got, err)
	}
}

func TestScannerFeedBeforeDrained(t *testing.T) {
	s := NewScanner(0)
	s.Feed([]byte("data: a\n\ndata: b\n\n"))
	if _, ok, _ := s.Next(); !ok {
		t.Fatal("no first event")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for Feed before the previous chunk was consumed")
		}
	}()
	s.Feed([]byte("data: c\n\n"))
}

// TestScannerResetLetsGoOfLargeEvents scans a 36 MiB event, split across chunks so that it
// passes through the partial line too, and checks that Reset keeps no buffer past
// MaxKeptBuffer, while a Scanner that saw only small events keeps its buffers.
func TestScannerResetLetsGoOfLargeEvents(t *testing.T) {
	const size = 36 << 20
	event := []byte("event: response.created\ndata: " + strings.Repeat("i", size) + "\n\n")
	s := NewScanner(64 << 20)
	got, err := scanChunks(s, [][]byte{event[:size/2], event[size/2:]})
	if err != nil || len(got) != 1 || len(got[0].data) != size {
		t.Fatalf("got %d events, %v", len(got), err)
	}
	if s.Cap() < size {
		t.Fatalf("the Scanner holds %d bytes before Reset, want the event's %d", s.Cap(), size)
	}
	s.Reset(0)
	if n := s.Cap(); n > 3*MaxKeptBuffer {
		t.Fatalf("the Scanner holds %d bytes after Reset", n)
	}

	small := NewScanner(0)
	if _, err := scanChunks(small, [][]byte{[]byte("data: x"), []byte("y\n\n")}); err != nil {
		t.Fatal(err)
	}
	before := small.Cap()
	small.Reset(0)
	if before == 0 || small.Cap() != before {
		t.Fatalf("a small Scanner holds %d bytes after Reset, %d before", small.Cap(), before)
	}
}
