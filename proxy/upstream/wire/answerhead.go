package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

// Head holds the header lines of an answer that ReadPlainHead read, as the
// upstream sent them: the relay copies them to the client from here (see
// upstream's Relay.Begin and Relay.eachAnswerHeader). A provider's answer
// carries about twenty headers; fasthttp's parser copied and checked each
// into the answer's header, and the relay then copied each again into the
// client's: 2.1 µs of a chat call (upstream's BenchmarkAnswerHead). Read
// here, the head costs one scan and one copy of its bytes, and the answer's
// header gets only what the transport and the relay act on.
//
// The zero value holds no head. Not safe for concurrent use.
type Head struct {
	*headLines // from headLinesPool once ReadPlainHead read the head; nil otherwise
}

// Read reports whether ReadPlainHead read the answer's head: its lines hold
// the headers.
func (h *Head) Read() bool { return h.headLines != nil }

// headLines are the lines of a head and where its headers lie in them.
type headLines struct {
	lines []byte     // the header lines, the status line and the blank line left out
	at    []headerAt // where each header's name and value lie in lines
	conn  int        // 1 + the index in at of the Connection header, 0 for none
}

// headLinesPool holds the lines of the heads not being relayed: a relay
// gives them back once the client's response has the headers (see
// upstream's Relay.Begin), so that a stream does not hold them while it
// lasts.
var headLinesPool = sync.Pool{New: func() any { return new(headLines) }}

// headerAt is where a header's name and value lie in headLines.lines.
type headerAt struct{ name, colon, value, end uint32 }

// Reset forgets the head and gives its lines back to the pool.
func (h *Head) Reset() {
	if h.headLines != nil {
		h.lines, h.at, h.conn = h.lines[:0], h.at[:0], 0
		headLinesPool.Put(h.headLines)
		h.headLines = nil
	}
}

// Len returns the number of headers of a head read, 0 of none.
func (h *Head) Len() int {
	if h.headLines == nil {
		return 0
	}
	return len(h.at)
}

// Header returns the name and value of the i-th header; valid until Reset.
func (h *Head) Header(i int) (name, value []byte) {
	a := h.at[i]
	return h.lines[a.name:a.colon], h.lines[a.value:a.end]
}

// Connection returns the value of the head's Connection header, which a
// head read has at most one of; ok is false when it has none. The relay
// looks for the headers it names without a pass over the others.
func (h *Head) Connection() (value []byte, ok bool) {
	if h.headLines == nil || h.conn == 0 {
		return nil, false
	}
	a := h.at[h.conn-1]
	return h.lines[a.value:a.end], true
}

// Plain reports whether the i-th header's line is written as fasthttp
// writes one: a single space between the colon and the value.
func (h *Head) Plain(i int) bool {
	a := h.at[i]
	return a.value == a.colon+2 && h.lines[a.colon+1] == ' '
}

// Lines returns the lines of the headers from the i-th up to the j-th (j
// excluded, Len for the last), as the upstream sent them, each with its
// CRLF; valid until Reset.
func (h *Head) Lines(i, j int) []byte {
	end := len(h.lines)
	if j < len(h.at) {
		end = int(h.at[j].name)
	}
	return h.lines[h.at[i].name:end]
}

// ReadPlainHead reads the head of an answer into resp and h when it is
// plainly framed and whole in br's buffer once its first byte came, and
// reports whether it did; otherwise it reads nothing, and fasthttp's parser
// reads the head as before. Plainly framed is a subset of what fasthttp accepts, read the
// same: HTTP/1.1; a status from 200 to 599 but 204 and 304; each line
// ended by CRLF; names of token characters followed by the colon; values of
// the bytes fasthttp allows, neither empty nor ending in white space, none
// folded; one Content-Length of digits or one Transfer-Encoding: chunked,
// not both; at most one Connection and one Content-Type; no Trailer. The
// status, the framing, the content type and a Connection: close go into
// resp's header, which the caller prepared (reset, names not normalized,
// no default content type: see upstream's readHead); every line goes into h.
//
// A failure to read the first byte is returned as fasthttp's parser returns
// it: fasthttp.ErrTimeout for a timeout, io.EOF for anything else.
func ReadPlainHead(br *bufio.Reader, resp *fasthttp.Response, h *Head) (bool, error) {
	h.Reset()
	if _, err := br.Peek(1); err != nil {
		if isTimeout(err) {
			return false, fasthttp.ErrTimeout
		}
		return false, io.EOF
	}
	buf, _ := br.Peek(br.Buffered())
	status, start, ok := answerStatus(buf)
	if !ok {
		return false, nil
	}
	h.headLines = headLinesPool.Get().(*headLines)
	var f answerFraming
	end, ok := f.scan(buf, start, h)
	if !ok {
		h.Reset()
		return false, nil // not plain, or not all here: fasthttp's parser reads it
	}
	h.lines = append(h.lines[:0], buf[start:end]...)
	hd := &resp.Header
	hd.SetStatusCode(status)
	if f.chunked {
		hd.SetContentLength(-1)
	} else {
		hd.SetContentLength(f.length)
	}
	if f.contentType != nil {
		hd.SetContentTypeBytes(f.contentType)
	}
	if f.close {
		hd.SetConnectionClose()
	}
	br.Discard(end + 2)
	return true, nil
}

// answerStatus reads the status line at the start of buf, and returns the
// status and where the line after it starts.
func answerStatus(buf []byte) (int, int, bool) {
	const proto = "HTTP/1.1 "
	eol := bytes.IndexByte(buf, '\n')
	if eol < len(proto)+4 || buf[eol-1] != '\r' || string(buf[:len(proto)]) != proto {
		return 0, 0, false
	}
	line := buf[len(proto) : eol-1]
	status := 0
	for _, c := range line[:3] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		status = status*10 + int(c-'0')
	}
	if status < 200 || status > 599 || status == 204 || status == 304 {
		return 0, 0, false
	}
	if reason := line[3:]; len(reason) > 0 {
		if reason[0] != ' ' {
			return 0, 0, false
		}
		for _, c := range reason {
			if validHeaderValue[c] == 0 {
				return 0, 0, false
			}
		}
	}
	return status, eol + 1, true
}

// answerFraming is what scan finds in an answer's header lines.
type answerFraming struct {
	length              int
	contentType         []byte
	chunked, close      bool
	lengths, encodings  int
	connections, ctypes int
}

// scan checks the header lines of an answer that start at buf[start:] (see
// ReadPlainHead), finds its framing, and notes where each header lies in
// h.at, relative to start. It returns where the lines end, before the blank
// line; false when they are not plain or not all in buf: fasthttp's parser
// must read them.
func (f *answerFraming) scan(buf []byte, start int, h *Head) (int, bool) {
	h.at, h.conn = h.at[:0], 0
	off := start
	for {
		if off+1 < len(buf) && buf[off] == '\r' && buf[off+1] == '\n' {
			break
		}
		a, next, ok := headerLine(buf, off)
		conns := f.connections
		if !ok || !f.special(buf[a.name:a.colon], buf[a.value:a.end]) {
			return 0, false
		}
		if f.connections != conns {
			h.conn = len(h.at) + 1
		}
		a.name, a.colon, a.value, a.end = a.name-uint32(start), a.colon-uint32(start), a.value-uint32(start), a.end-uint32(start)
		h.at = append(h.at, a)
		off = next
	}
	switch {
	case f.lengths+f.encodings != 1, f.connections > 1, f.ctypes > 1:
		return 0, false
	}
	return off, true
}

// headerLine reads the header line at buf[off:]: it checks its name and
// value, and returns where they lie and where the next line starts. The
// value's check stops at the first byte that may not be in a value, which
// must be the line's CR.
func headerLine(buf []byte, off int) (headerAt, int, bool) {
	i := off
	for i < len(buf) && tokenByte[buf[i]] == 1 {
		i++
	}
	if i == off || i == len(buf) || buf[i] != ':' {
		return headerAt{}, 0, false
	}
	colon := i
	for i++; i < len(buf) && (buf[i] == ' ' || buf[i] == '\t'); i++ {
	}
	value := i
	for i+8 <= len(buf) && plainValueBytes(binary.LittleEndian.Uint64(buf[i:])) {
		i += 8
	}
	for i < len(buf) && validHeaderValue[buf[i]] == 1 {
		i++
	}
	end := i
	if end == value || buf[end-1] == ' ' || buf[end-1] == '\t' || i+1 >= len(buf) || buf[i] != '\r' || buf[i+1] != '\n' {
		return headerAt{}, 0, false
	}
	return headerAt{uint32(off), uint32(colon), uint32(value), uint32(end)}, i + 2, true
}

// plainValueBytes reports whether none of the 8 bytes in x is below SP or DEL:
// each may then be in a value (see validHeaderValue), and the scan takes them
// at once. A tab, also allowed, is taken by the byte-wise scan after it.
func plainValueBytes(x uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	below := (x - lsb*' ') &^ x & msb // a byte under 0x20 (bytes of 0x80 and up excluded by &^ x)
	d := x ^ (lsb * 0x7f)
	del := (d - lsb) &^ d & msb // a byte equal to DEL
	return below|del == 0
}

// special notes a header that frames the answer or that fasthttp keeps
// apart; false for one the fast path leaves to fasthttp.
func (f *answerFraming) special(name, value []byte) bool {
	switch len(name) {
	case len("Content-Length"):
		if !strings.EqualFold(b2s(name), "Content-Length") {
			return true
		}
		if len(value) > 18 {
			return false
		}
		n := 0
		for _, c := range value {
			if c < '0' || c > '9' {
				return false
			}
			n = n*10 + int(c-'0')
		}
		f.length = n
		f.lengths++
	case len("Transfer-Encoding"):
		if !strings.EqualFold(b2s(name), "Transfer-Encoding") {
			return true
		}
		if !strings.EqualFold(b2s(value), "chunked") {
			return false
		}
		f.chunked = true
		f.encodings++
	case len("Connection"):
		if !strings.EqualFold(b2s(name), "Connection") {
			return true
		}
		f.close = string(value) == "close"
		f.connections++
	case len("Content-Type"):
		if !strings.EqualFold(b2s(name), "Content-Type") {
			return true
		}
		f.contentType = value
		f.ctypes++
	case len("Trailer"):
		return !strings.EqualFold(b2s(name), "Trailer")
	}
	return true
}

// tokenByte marks the bytes of a header name (RFC 9110 tchar), and
// validHeaderValue those of a value (VCHAR, SP, HTAB, obs-text), as
// fasthttp's parser takes them.
var tokenByte, validHeaderValue = func() (t, v [256]byte) {
	for c := range 256 {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z',
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0:
			t[c] = 1
		}
		if c == '\t' || c >= ' ' && c != 0x7f {
			v[c] = 1
		}
	}
	return t, v
}()
