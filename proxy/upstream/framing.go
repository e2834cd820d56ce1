package upstream

import (
	"bytes"
	"strings"
)

// framing follows the HTTP framing of the answer bytes a connection hands to
// fasthttp's read buffer, so that the relay can tell, with nothing but its
// own count of the body bytes it has read, whether the next read of a
// streamed body returns data without waiting for the network (see ready).
// fasthttp's buffer sits above the connection, so every byte of the answer
// passes here first: what has passed and what the relay has taken are known;
// their difference is what waits in the buffer.
//
// It never decides anything about the answer: fasthttp parses and bounds it.
// On bytes it does not understand it gives up (bad), and ready then says no,
// which only costs the relay its gathering of a burst.
type framing struct {
	inBody  bool
	bad     bool
	lineLen int  // bytes in the header or trailer line being read
	lines   int  // header lines ended so far
	lastCR  bool // the line's last byte so far is a CR
	status  byte

	body int64 // raw body bytes passed
	// A chunked body, followed whether or not the answer is chunked (the
	// relay tells which when it asks): data counts the data bytes passed,
	// whole those of the chunks passed with their closing CRLF, end where the
	// current chunk's data ends.
	data, whole, end int64
	state            chunkState
	size             int64
	digits           int
}

// maxSizeLine bounds what is followed of a chunk size line's extensions:
// past it the body is taken for one that is not chunked.
const maxSizeLine = 256

type chunkState uint8

const (
	chunkSize    chunkState = iota // reading the size's hex digits
	chunkExt                       // reading the rest of the size line
	chunkData                      // reading the chunk's data
	chunkCR                        // the CR after the data
	chunkLF                        // the LF after the data
	chunkTrailer                   // after the final chunk: trailer lines
	chunkDone                      // the final chunk and trailers have passed
)

// reset starts following a new answer: the request was just written.
func (f *framing) reset() { *f = framing{} }

// feed follows the bytes p, just read from the connection.
func (f *framing) feed(p []byte) {
	if !f.inBody {
		p = f.feedHeader(p)
	}
	f.body += int64(len(p))
	for len(p) > 0 && f.state != chunkDone && !f.bad {
		p = f.feedChunked(p)
	}
}

// feedHeader follows header bytes and returns what follows the header. A 1xx
// answer's header is followed by another header.
func (f *framing) feedHeader(p []byte) []byte {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.noteLine(p)
			return nil
		}
		f.noteLine(p[:i])
		p = p[i+1:]
		ended := f.lines > 0 && (f.lineLen == 0 || f.lineLen == 1 && f.lastCR)
		f.lines++
		f.lineLen = 0
		if !ended {
			continue
		}
		if f.status == '1' {
			f.lines, f.status = 0, 0
			continue
		}
		f.inBody = true
		return p
	}
	return nil
}

// noteLine counts the line bytes in p and notes the first digit of the
// status code ("HTTP/1.1 200": the tenth byte of the first line).
func (f *framing) noteLine(p []byte) {
	if len(p) == 0 {
		return
	}
	const at = len("HTTP/1.1 ")
	if f.lines == 0 && f.lineLen <= at && at < f.lineLen+len(p) {
		f.status = p[at-f.lineLen]
	}
	f.lineLen += len(p)
	f.lastCR = p[len(p)-1] == '\r'
}

// feedChunked follows chunked framing in p and returns what is left of it.
func (f *framing) feedChunked(p []byte) []byte {
	if f.state == chunkData {
		k := min(f.end-f.data, int64(len(p)))
		f.data += k
		if f.data == f.end {
			f.state = chunkCR
		}
		return p[k:]
	}
	f.chunkByte(p[0])
	return p[1:]
}

// chunkByte follows one byte of a size line or of the CRLF after data.
func (f *framing) chunkByte(c byte) {
	switch f.state {
	case chunkSize:
		if d, ok := hexDigit(c); ok {
			f.size, f.digits = f.size<<4|int64(d), f.digits+1
			f.bad = f.digits > 15
			return
		}
		// A size line goes on after its digits with an extension, blanks or
		// its end; a body that is not chunked seldom does.
		f.bad = f.digits == 0 || strings.IndexByte(";\t \r\n", c) < 0
		f.state = chunkExt
		f.chunkByte(c)
	case chunkExt:
		if c != '\n' {
			f.lineLen++
			f.bad = f.lineLen > maxSizeLine // not a chunked body
			return
		}
		switch {
		case f.digits == 0:
			f.bad = true
		case f.size == 0:
			f.state = chunkTrailer
		default:
			f.state, f.end = chunkData, f.data+f.size
		}
		f.lineLen = 0
	case chunkCR:
		f.state, f.bad = chunkLF, c != '\r'
	case chunkLF:
		f.state, f.bad = chunkSize, c != '\n'
		f.whole, f.size, f.digits = f.data, 0, 0
	case chunkTrailer:
		switch c {
		case '\n':
			if f.lineLen == 0 {
				f.state = chunkDone
			}
			f.lineLen = 0
		case '\r':
		default:
			f.lineLen++
		}
	}
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ready reports whether the next read of the body returns data without
// waiting, when read bytes of it were taken so far. For a chunked body
// (fasthttp reads a chunk's closing CRLF in the read that ends its data)
// that is: the chunk being read was passed whole with its CRLF, or part of
// its data is still unread and its end has not passed yet.
func (f *framing) ready(chunked bool, read int64) bool {
	switch {
	case !f.inBody:
		return false
	case !chunked:
		return f.body > read
	case f.bad:
		return false
	case read < f.whole:
		return true
	}
	return f.state == chunkData && f.data > read
}

// ended reports whether all that is left of a chunked body, read bytes of
// which were taken, is its final chunk, passed whole: the next read returns
// the end of the body without waiting.
func (f *framing) ended(read int64) bool {
	return f.inBody && !f.bad && f.state == chunkDone && read == f.whole
}
