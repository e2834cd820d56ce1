package load

import "github.com/modelgate/gateway/parse"

// SSECounter counts the events of a server-sent event stream fed to it in
// arbitrary pieces, as the HTML living standard dispatches them: an event is
// a run of lines holding at least one "data" field, ended by a blank line.
// Comment lines (":...") and blocks without data are not events, nor is a
// last block the stream never ended with a blank line. Its lines are
// parse.Splitter's: they end in LF, CR or CRLF, also when CR and LF arrive
// in different pieces.
//
// The zero value is ready to use; an SSECounter is not safe for concurrent use.
type SSECounter struct {
	lines   parse.Splitter
	events  int
	lineLen int     // bytes of the current line seen so far
	head    [5]byte // the first bytes of the current line
	hasData bool    // the current block holds a data field
}

// Reset makes c ready for a new stream.
func (c *SSECounter) Reset() { *c = SSECounter{} }

// Events returns the number of complete events seen so far.
func (c *SSECounter) Events() int { return c.events }

// Write feeds the next piece of the stream; it never fails.
func (c *SSECounter) Write(p []byte) (int, error) {
	c.lines.Feed(p)
	for {
		piece, end, ok := c.lines.Next()
		if !ok {
			return len(p), nil
		}
		c.addToLine(piece)
		switch end {
		case parse.BlankLine:
			if c.hasData {
				c.events++
			}
			c.hasData = false
		case parse.LineEnd:
			c.endLine()
		}
	}
}

func (c *SSECounter) addToLine(b []byte) {
	if c.lineLen < len(c.head) {
		copy(c.head[c.lineLen:], b)
	}
	c.lineLen += len(b)
}

// endLine ends a line that is not blank: a data field marks the block.
func (c *SSECounter) endLine() {
	if c.lineLen == 4 && string(c.head[:4]) == "data" || c.lineLen >= 5 && string(c.head[:5]) == "data:" {
		c.hasData = true
	}
	c.lineLen = 0
}
