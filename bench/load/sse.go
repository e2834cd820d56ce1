package load

import "bytes"

// SSECounter counts the events of a server-sent event stream fed to it in
// arbitrary pieces, as the HTML living standard dispatches them: an event is
// a run of lines holding at least one "data" field, ended by a blank line.
// Comment lines (":...") and blocks without data are not events, nor is a
// last block the stream never ended with a blank line. Lines end in LF, CR
// or CRLF, also when CR and LF arrive in different pieces.
//
// The zero value is ready to use; an SSECounter is not safe for concurrent use.
type SSECounter struct {
	events  int
	lineLen int     // bytes of the current line seen so far
	head    [5]byte // the first bytes of the current line
	hasData bool    // the current block holds a data field
	lastCR  bool    // the previous byte ended a line with CR
}

// Reset makes c ready for a new stream.
func (c *SSECounter) Reset() { *c = SSECounter{} }

// Events returns the number of complete events seen so far.
func (c *SSECounter) Events() int { return c.events }

// Write feeds the next piece of the stream; it never fails.
func (c *SSECounter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if c.lastCR {
			c.lastCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := lineEnd(p)
		if i < 0 {
			c.addToLine(p)
			break
		}
		c.addToLine(p[:i])
		c.endLine()
		c.lastCR = p[i] == '\r'
		p = p[i+1:]
	}
	return n, nil
}

func (c *SSECounter) addToLine(b []byte) {
	if c.lineLen < len(c.head) {
		copy(c.head[c.lineLen:], b)
	}
	c.lineLen += len(b)
}

func (c *SSECounter) endLine() {
	switch {
	case c.lineLen == 0:
		if c.hasData {
			c.events++
		}
		c.hasData = false
	case c.lineLen == 4 && string(c.head[:4]) == "data",
		c.lineLen >= 5 && string(c.head[:5]) == "data:":
		c.hasData = true
	}
	c.lineLen = 0
}

// lineEnd returns the index of the first CR or LF in p, or -1; two SIMD
// scans beat one byte-set scan, CR being rare.
func lineEnd(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	head := p
	if i >= 0 {
		head = p[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}
