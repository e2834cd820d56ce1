package load

import "github.com/modelgate/gateway/parse"

// StampPrefix starts the comment line of a stamped SSE frame: the frame's
// send time in unix nanoseconds follows, then the line end (bench/sim's
// x-sim-stamp).
const StampPrefix = ": t="

// maxStampLine bounds the stamp lines StampScanner reads: the prefix and 19
// digits fit; a longer comment line is not a stamp.
const maxStampLine = len(StampPrefix) + 19

// StampScanner reads the send stamps of an SSE stream fed to it in arbitrary
// pieces, and counts its events as SSECounter does. A stamp is a comment line
// StampPrefix + decimal digits, split anywhere across pieces; other lines,
// and stamp lines that do not parse, are skipped.
//
// The zero value is ready to use; a StampScanner is not safe for concurrent use.
type StampScanner struct {
	events  SSECounter
	lines   parse.Splitter
	line    [maxStampLine]byte
	lineLen int // bytes of the current line seen so far, also past len(line)
	stamps  []int64
	bad     int
}

// Reset makes s ready for a new stream; it keeps its stamp buffer.
func (s *StampScanner) Reset() {
	st := s.stamps[:0]
	*s = StampScanner{stamps: st}
}

// Write feeds the next piece of the stream; it never fails.
func (s *StampScanner) Write(p []byte) (int, error) {
	_, _ = s.events.Write(p)
	s.lines.Feed(p)
	for {
		piece, end, ok := s.lines.Next()
		if !ok {
			return len(p), nil
		}
		if s.lineLen < len(s.line) {
			copy(s.line[s.lineLen:], piece)
		}
		s.lineLen += len(piece)
		if end != parse.MidLine {
			s.endLine()
		}
	}
}

func (s *StampScanner) endLine() {
	n := s.lineLen
	s.lineLen = 0
	if n <= len(StampPrefix) || n > len(s.line) || string(s.line[:len(StampPrefix)]) != StampPrefix {
		return
	}
	var v int64
	for _, c := range s.line[len(StampPrefix):n] {
		if c < '0' || c > '9' {
			s.bad++
			return
		}
		v = v*10 + int64(c-'0')
	}
	s.stamps = append(s.stamps, v)
}

// Take returns the stamps read since the last Take, oldest first; the slice
// is valid until the next Write.
func (s *StampScanner) Take() []int64 {
	st := s.stamps
	s.stamps = s.stamps[:0]
	return st
}

// Events returns the number of complete events seen so far.
func (s *StampScanner) Events() int { return s.events.Events() }

// Malformed returns the number of stamp lines that did not parse.
func (s *StampScanner) Malformed() int { return s.bad }
