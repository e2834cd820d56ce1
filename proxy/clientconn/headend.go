package clientconn

import (
	"bytes"
	"errors"
)

// A request head's lines may end in a bare LF, and fasthttp's reader takes the
// first empty line, bare or not, as the end of the head; its header parser,
// though, starts only once it has a CRLF CRLF. A head whose empty line is a
// bare LF, or follows a line that ends in one, is read only if something the
// client sends after it holds a CRLF CRLF; otherwise fasthttp waits for one
// until the read timeout. The gateway refuses such a head, whatever follows
// it, with 400:
//   - while fasthttp waits: the client connection sees the server ask for more
//     of a head whose bytes it was given already hold its end (headScan, run
//     only on heads that take more than one read), and fails the read with
//     ErrHeadEnd, which proxy's requestError answers;
//   - once fasthttp read one: proxy's serve looks at the end of its raw header block
//     (HeadEndsBadly).

// ErrHeadEnd is the error of a client connection's read while fasthttp waits
// for more of a head that ended without CRLF CRLF.
var ErrHeadEnd = errors.New("the request head does not end with CRLF CRLF")

var crlfCRLF = []byte("\r\n\r\n")

// HeadEndsBadly reports whether the raw header block fasthttp read ends
// without CRLF CRLF. A head without header fields has an empty block, and
// is not looked at: HTTP/1.1 requires Host.
func HeadEndsBadly(raw []byte) bool {
	return len(raw) > 0 && !bytes.HasSuffix(raw, crlfCRLF)
}

// headScan follows the head of a request through the reads that bring it,
// line by line as fasthttp's reader splits it, until its empty line. The
// zero value is done (not open) until start; not safe for concurrent use.
type headScan struct {
	state     uint8 // headDone, headStart, headFields or headBad
	lineLen   uint8 // bytes of the unfinished line read so far, counted up to 2
	lastCR    bool  // the bytes before ended in CR
	fields    bool  // a header field line was read
	fieldCRLF bool  // the last field line ended in CRLF
}

const (
	headDone   = iota // no head is being read
	headStart         // before the request line: empty lines, then the request line
	headFields        // after the request line
	headBad           // the head ended without CRLF CRLF
)

// start begins a head: the next bytes fed are its first.
func (s *headScan) start() { *s = headScan{state: headStart} }

// open reports whether the head's empty line is still to come.
func (s *headScan) open() bool { return s.state == headStart || s.state == headFields }

// bad reports whether the head ended without CRLF CRLF.
func (s *headScan) bad() bool { return s.state == headBad }

// feed reads b, the next bytes of the head, up to its empty line; bytes after
// it (a body, a pipelined request) are not looked at. Once the empty line is
// read, the scan is done, or bad when the head ends there without CRLF CRLF.
func (s *headScan) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.lineLen = uint8(min(int(s.lineLen)+len(b), 2))
			s.lastCR = b[len(b)-1] == '\r'
			return
		}
		cr := i > 0 && b[i-1] == '\r' || i == 0 && s.lastCR
		n := int(s.lineLen) + i // the line's bytes before its LF
		empty := n == 0 || n == 1 && cr
		b = b[i+1:]
		s.lineLen, s.lastCR = 0, false
		switch {
		case s.state == headStart:
			if !empty { // the request line; empty lines before it are skipped
				s.state = headFields
			}
		case empty:
			s.state = headDone
			if !cr || s.fields && !s.fieldCRLF {
				s.state = headBad
			}
			return
		default:
			s.fields, s.fieldCRLF = true, cr
		}
	}
}
