package parse

import (
	"bytes"
	"errors"
)

// DefaultMaxEvent is the event size limit of a Scanner made with a limit of 0.
const DefaultMaxEvent = 1 << 20

// ErrEventTooLarge is returned by Scanner.Next when the lines of one event add up to more
// than the Scanner's limit.
var ErrEventTooLarge = errors.New("parse: server-sent event larger than the limit")

// Event is one server-sent event.
type Event struct {
	Name []byte // value of the last "event" field; empty means the default type, "message"
	Data []byte // values of the "data" fields joined by "\n"
}

// Scanner splits a server-sent-events stream, fed in chunks of any size, into events, as the
// WHATWG EventSource specification parses it: lines end in "\n", "\r\n" or "\r"; a blank line
// ends an event; a line starting with ':' is a comment; a field's value follows the first ':'
// with one leading space dropped; "data" values are joined by "\n"; an event without "data"
// fields is not dispatched; a leading byte order mark is dropped; an unfinished event at the
// end of the stream is never reported. Fields other than "event" and "data" are ignored.
//
// The Scanner keeps at most one event's worth of bytes: the lines of one event (from the line
// after a blank line up to the next blank line, line ends not counted) may add up to maxEvent
// bytes; beyond that Next returns ErrEventTooLarge, and keeps returning it until Reset.
//
// The zero value is ready to use, with DefaultMaxEvent. Use Reset to reuse a Scanner, e.g.
// from a sync.Pool: it keeps its buffers up to MaxKeptBuffer, so a warm Scanner does not
// allocate. Not safe for concurrent use.
type Scanner struct {
	maxEvent int
	lines    Splitter // the caller's chunk, not yet scanned
	partial  []byte   // a line cut by the end of a chunk
	name     []byte
	data     []byte // "data" values, each followed by '\n'

	lineBytes int  // bytes of the lines of the event so far
	hasData   bool // the event has a "data" field
	delivered bool // name and data were handed out by Next and are cleared by the next Next
	started   bool // the byte order mark check is done
	bomBytes  int  // bytes of a byte order mark matched so far
	err       error
}

// NewScanner returns a Scanner whose events may be up to maxEvent bytes; maxEvent <= 0 means
// DefaultMaxEvent.
func NewScanner(maxEvent int) *Scanner {
	s := &Scanner{}
	s.Reset(maxEvent)
	return s
}

// MaxKeptBuffer is the largest buffer capacity Scanner.Reset keeps. An event larger than
// that (a Responses response.created that echoes a large request) is rare, and a pooled
// Scanner that kept its buffers would hold the largest event it ever saw for good: a buffer
// past the bound goes back to the heap, as fasthttp's Request.ReleaseBody(size) lets a
// large body go instead of pooling it.
const MaxKeptBuffer = 64 << 10

// Reset makes s ready for a new stream with the given limit (<= 0 means DefaultMaxEvent),
// keeping its buffers up to MaxKeptBuffer.
func (s *Scanner) Reset(maxEvent int) {
	*s = Scanner{maxEvent: maxEvent, partial: kept(s.partial), name: kept(s.name), data: kept(s.data)}
}

// kept returns b emptied, or nil when its capacity is past MaxKeptBuffer.
func kept(b []byte) []byte {
	if cap(b) > MaxKeptBuffer {
		return nil
	}
	return b[:0]
}

// Cap returns the capacity of the buffers s holds, in bytes.
func (s *Scanner) Cap() int { return cap(s.partial) + cap(s.name) + cap(s.data) }

// Feed gives s the next chunk of the stream. s keeps p, without copying, until Next reports
// that it needs more input, so p must stay unchanged until then; Feed must not be called
// before that either.
func (s *Scanner) Feed(p []byte) {
	if len(s.lines.in) != 0 {
		panic("BUG: parse: Scanner.Feed called before Next consumed the previous chunk")
	}
	s.lines.Feed(p)
}

// Next returns the next complete event. ok is false when the input fed so far holds no more
// complete event: Feed the next chunk then. The event's bytes are valid until the next call
// of Next, Feed or Reset.
func (s *Scanner) Next() (ev Event, ok bool, err error) {
	if s.delivered {
		s.clearEvent()
	}
	for s.err == nil {
		line, more := s.nextLine()
		if !more {
			break
		}
		if len(line) > 0 {
			s.field(line)
			continue
		}
		if s.hasData {
			s.delivered = true
			return Event{Name: s.name, Data: s.data[:len(s.data)-1]}, true, nil
		}
		s.clearEvent()
	}
	return Event{}, false, s.err
}

func (s *Scanner) clearEvent() {
	s.name, s.data = s.name[:0], s.data[:0]
	s.lineBytes, s.hasData, s.delivered = 0, false, false
}

// nextLine returns the next complete line without its line end, or false when the input
// ends first; then the unfinished line is kept in s.partial.
func (s *Scanner) nextLine() ([]byte, bool) {
	if !s.started && !s.skipBOM() {
		return nil, false
	}
	line, end, ok := s.lines.Next()
	if !ok {
		return nil, false
	}
	if end == MidLine {
		if s.lineBytes+len(s.partial)+len(line) > s.maxEventSize() {
			return nil, s.fail()
		}
		s.partial = append(s.partial, line...)
		return nil, false
	}
	if len(s.partial) > 0 {
		line = append(s.partial, line...)
		s.partial = line[:0] // line stays valid: nothing is added to partial before it is used
	}
	if s.lineBytes += len(line); s.lineBytes > s.maxEventSize() {
		return nil, s.fail()
	}
	return line, true
}

func (s *Scanner) maxEventSize() int {
	if s.maxEvent <= 0 {
		return DefaultMaxEvent
	}
	return s.maxEvent
}

func (s *Scanner) fail() bool {
	s.err, s.lines.in, s.lines.lfKnown = ErrEventTooLarge, nil, false
	return false
}

// bom is the UTF-8 byte order mark.
const bom = "\xEF\xBB\xBF"

// skipBOM drops a byte order mark at the start of the stream, which may come split across
// chunks. It reports false when the input ends before it can tell.
func (s *Scanner) skipBOM() bool {
	in := &s.lines
	for s.bomBytes < len(bom) && len(in.in) > 0 && in.in[0] == bom[s.bomBytes] {
		s.bomBytes++
		in.advance(1)
	}
	if s.bomBytes < len(bom) && len(in.in) == 0 {
		return false
	}
	if s.bomBytes < len(bom) {
		// Not a byte order mark: the bytes taken for one start the first line.
		s.partial = append(s.partial, bom[:s.bomBytes]...)
	}
	s.started = true
	return true
}

// field applies one non-blank line to the event being built.
func (s *Scanner) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		s.data = append(append(s.data, value...), '\n')
		s.hasData = true
	case "event":
		s.name = append(s.name[:0], value...)
	}
}

// Boundary tells what ends a piece of an SSE stream that Splitter.Next returns.
type Boundary uint8

const (
	// MidLine: the input ended inside a line, which goes on in the next chunk.
	MidLine Boundary = iota
	// LineEnd: a line that is not blank ended.
	LineEnd
	// BlankLine: a blank line ended; it ends the event before it, if any.
	BlankLine
)

// Splitter splits a server-sent-events stream, fed in chunks of any size, into lines as the
// WHATWG EventSource specification does: a line ends in "\n", "\r\n" or "\r", and a "\r\n"
// split across two chunks is one line end. A blank line ends an event. It is the one line
// splitter of the project: Scanner reads its lines through it, the relay of package
// proxy/upstream finds the end of events and of streams with it, and the load generator
// counts events with it.
//
// It keeps no bytes: Next hands out pieces of the chunk given to Feed. The zero value is
// ready to use; Reset makes it so again. Not safe for concurrent use.
type Splitter struct {
	in      []byte // the caller's chunk, not yet split
	lf      int    // index in "in" of the next '\n', or -1 for none; valid when lfKnown
	lfKnown bool
	skipLF  bool // the last line ended in '\r': a '\n' that comes next belongs to it
	lineLen int  // bytes of the current line in the chunks before
}

// Reset makes s ready for a new stream.
func (s *Splitter) Reset() { *s = Splitter{} }

// Feed gives s the next chunk of the stream, which s keeps without copying until Next has
// consumed it (Next reports ok false).
func (s *Splitter) Feed(p []byte) {
	s.in, s.lfKnown = p, false
}

// Next returns the next piece of the chunk: the bytes of the current line up to its line end
// (without it) or up to the end of the chunk, and what ended the piece. ok is false when the
// chunk is used up. A line that began in an earlier chunk is handed out in pieces; a blank
// line is one whose pieces hold no byte at all.
func (s *Splitter) Next() (piece []byte, end Boundary, ok bool) {
	if s.skipLF && len(s.in) > 0 {
		s.skipLF = false
		if s.in[0] == '\n' {
			s.advance(1)
		}
	}
	if len(s.in) == 0 {
		s.in = nil // keep no reference to the caller's chunk
		return nil, MidLine, false
	}
	i := s.lineEnd()
	if i < 0 {
		piece = s.in
		s.advance(len(piece))
		s.lineLen += len(piece)
		return piece, MidLine, true
	}
	piece = s.in[:i]
	s.skipLF = s.in[i] == '\r'
	s.advance(i + 1)
	end = LineEnd
	if s.lineLen == 0 && i == 0 {
		end = BlankLine
	}
	s.lineLen = 0
	return piece, end, true
}

// InLine reports whether the bytes fed so far end inside a line.
func (s *Splitter) InLine() bool { return s.lineLen > 0 || len(s.in) > 0 }

// lineEnd returns the index in s.in of the first '\n' or '\r', or -1. It remembers where the
// next '\n' is, so that many lines ending in a lone '\r' do not make it search the rest of
// the chunk for a '\n' again and again.
func (s *Splitter) lineEnd() int {
	if !s.lfKnown {
		s.lf, s.lfKnown = bytes.IndexByte(s.in, '\n'), true
	}
	if s.lf < 0 {
		return bytes.IndexByte(s.in, '\r')
	}
	if r := bytes.IndexByte(s.in[:s.lf], '\r'); r >= 0 {
		return r
	}
	return s.lf
}

// advance drops n split bytes from the front of s.in.
func (s *Splitter) advance(n int) {
	s.in = s.in[n:]
	switch {
	case s.lf >= n:
		s.lf -= n
	case s.lf >= 0:
		s.lfKnown = false
	}
}

// LastEventEnd returns the length of the finished events at the start of b, a run of whole
// lines of a stream: up to the end of its last blank line, or 0.
func LastEventEnd(b []byte) int {
	var s Splitter
	s.Feed(b)
	end := 0
	for {
		_, kind, ok := s.Next()
		if !ok {
			return end
		}
		if kind == BlankLine {
			end = len(b) - len(s.in)
			if s.skipLF && len(s.in) > 0 && s.in[0] == '\n' {
				end++ // the LF of the blank line's CRLF
			}
		}
	}
}
