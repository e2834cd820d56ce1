package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// The bounds on a chunk's size line, as fasthttp's own reader has them:
// sizes of at most 15 hex digits; the line itself (extensions) is bounded
// too, where fasthttp's is not.
const (
	maxChunkDigits = 15
	maxSizeLine    = 4 << 10
)

// ErrBrokenChunk is the error of a chunked body whose framing is malformed.
var ErrBrokenChunk = errors.New("wire: malformed chunked body")

var crlf = []byte("\r\n")

// ReadChunkSize reads a chunk's size line: hex digits, then optional blanks
// and extensions, then CRLF.
func ReadChunkSize(br *bufio.Reader) (int64, error) {
	var size int64
	digits, line := 0, 0
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, chunkErr(err)
		}
		line++
		if d, ok := hexDigit(c); ok && digits == line-1 {
			if digits++; digits > maxChunkDigits {
				return 0, ErrBrokenChunk
			}
			size = size<<4 | int64(d)
			continue
		}
		switch {
		case digits == 0 || c == '\n' || line > maxSizeLine:
			return 0, ErrBrokenChunk
		case c == '\r':
			return size, readLF(br)
		}
	}
}

// ReadCRLF reads the CRLF that ends a chunk's data.
func ReadCRLF(br *bufio.Reader) error {
	c, err := br.ReadByte()
	if err != nil {
		return chunkErr(err)
	}
	if c != '\r' {
		return ErrBrokenChunk
	}
	return readLF(br)
}

func readLF(br *bufio.Reader) error {
	c, err := br.ReadByte()
	if err != nil {
		return chunkErr(err)
	}
	if c != '\n' {
		return ErrBrokenChunk
	}
	return nil
}

// chunkErr is err met inside a chunked body: its end is unexpected there.
func chunkErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
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

// ChunkBuffered reports whether p starts with a whole chunk: its size line,
// data and CRLF; for the final chunk, its size line and what is there of the
// CRLF that ends the body without trailers. An upstream writes that CRLF with
// the size line or right after it (fasthttp's server, as the simulator, in a
// write of its own), so the relay waits for it with the stream's last events
// instead of sending them and then the body's end apart: knowing they are
// the last, it sends them and the end in one write (see upstream's Relay.SetTail). A
// final chunk with trailers counts as not ready, as the relay would wait for
// their end.
func ChunkBuffered(p []byte) bool {
	size, i := 0, 0
	for ; i < len(p); i++ {
		d, ok := hexDigit(p[i])
		if !ok {
			break
		}
		if i >= 8 { // above any chunk the relay would gather
			return false
		}
		size = size<<4 | int(d)
	}
	if i == 0 {
		return false
	}
	for ; i < len(p) && p[i] != '\n'; i++ { // extensions, up to the CRLF
	}
	// p[i] is the size line's '\n'; then size bytes of data and CRLF.
	if size == 0 {
		if i >= len(p) {
			return false
		}
		rest := p[i+1:]
		return bytes.HasPrefix(crlf, rest[:min(len(rest), 2)])
	}
	return i < len(p) && len(p)-(i+1) >= size+2
}
