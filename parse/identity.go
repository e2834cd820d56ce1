package parse

// IdentityKeys says where a stream's events carry the answer's id and model:
// the members ID and Model of an event's top-level object, or of the object
// that is its member In when In is set (a Responses event's "response", a
// Messages event's "message").
type IdentityKeys struct {
	In, ID, Model string
}

// MaxIdentity bounds the id and the model IdentityScanner keeps, in bytes of
// their JSON text: a longer value is not taken.
const MaxIdentity = 256

// Bounds on how much of a stream IdentityScanner reads: the events that carry
// the id and model come first.
const (
	maxIdentityEvents = 8
	maxIdentityBytes  = 1 << 20
)

// IdentityScanner finds an answer's id and model in an SSE stream, fed in
// chunks of any size, as the relay passes it on: the string values of the
// members IdentityKeys names, in the data lines of the first events. It
// follows the JSON of each event's data (nesting, strings, keys) a byte at a
// time but for the text of strings and other lines, which it skips in tight
// loops (BenchmarkIdentityScanner: a 4 KiB response.created in 3 µs, against
// 25 µs byte by byte). It keeps no event, and stops (Done) once it has
// both, once an event that carried one has ended, or after the first few
// events or a bounded number of bytes. An empty value is not taken (some providers send one before the
// first real chunk). Its state, the two values included, lives in the value:
// it does not allocate. Reset makes it ready for another stream. Not safe for
// concurrent use.
type IdentityScanner struct {
	keys   IdentityKeys
	done   bool
	events int
	bytes  int

	// the stream's lines: prefix counts the bytes of "data:" matched at a
	// line's start (-1: the line is not a data line, or its prefix is past);
	// started: the line has begun; cr: the last byte was a '\r'.
	prefix       int
	started, cr  bool
	eventStarted bool
	// broken: a line ended inside a string, which JSON does not allow: the
	// rest of the event is not read.
	broken bool

	// the JSON of the event's data
	depth   int
	objects uint64 // bit d: the value open at depth d+1 is an object
	in      int    // the depth of the object that is the member In, 0: none
	wantKey bool   // the next string opens a member: it is a key
	str     strMode
	esc     bool
	pending field // the member whose key was just read
	buf     [MaxIdentity]byte
	n       int // bytes of buf taken by the string being read; > len(buf): too long

	id, model   [MaxIdentity]byte
	idN, modelN int
}

type strMode uint8

const (
	strNone strMode = iota
	strSkip
	strKey
	strValue
)

type field uint8

const (
	fieldNone field = iota
	fieldID
	fieldModel
	fieldIn
)

// Reset makes s ready for another stream whose events carry the id and model
// where keys says.
func (s *IdentityScanner) Reset(keys IdentityKeys) {
	*s = IdentityScanner{keys: keys}
}

// Done reports whether s has stopped reading: Feed does nothing more.
func (s *IdentityScanner) Done() bool { return s.done }

// Identity returns the id and model found so far, each nil when not found.
// They are valid until the next Reset.
func (s *IdentityScanner) Identity() (id, model []byte) {
	if s.idN > 0 {
		id = s.id[:s.idN]
	}
	if s.modelN > 0 {
		model = s.model[:s.modelN]
	}
	return id, model
}

// Feed reads the next chunk of the stream.
func (s *IdentityScanner) Feed(p []byte) {
	if s.done {
		return
	}
	if s.bytes += len(p); s.bytes > maxIdentityBytes {
		s.done = true
	}
	for i := 0; i < len(p); i++ {
		if j := s.skip(p, i); j > i {
			if i = j; i == len(p) {
				return
			}
		}
		if c := p[i]; s.line(c) {
			s.json(c)
		}
		if s.done {
			return
		}
	}
}

// skip returns where, from p[i], the bytes that change nothing but the
// last-byte-was-'\r' flag end: the inside of a string not kept (most of an
// event's bytes are text), or the rest of a line that is not data.
func (s *IdentityScanner) skip(p []byte, i int) int {
	stops := &lineStops
	switch {
	case s.prefix < 0 || s.broken && s.started:
	case s.str == strSkip && !s.esc:
		stops = &stringStops
	default:
		return i
	}
	j := i
	for j < len(p) && !stops[p[j]] {
		j++
	}
	if j > i {
		s.cr = false
	}
	return j
}

// lineStops and stringStops are the bytes that end a skip.
var lineStops, stringStops = func() (l, s [256]bool) {
	l['\r'], l['\n'] = true, true
	s = l
	s['"'], s['\\'] = true, true
	return l, s
}()

// line follows the stream's lines through c, and reports whether c is a byte
// of a data line's value.
func (s *IdentityScanner) line(c byte) bool {
	cr := s.cr
	s.cr = c == '\r'
	if c == '\r' || c == '\n' {
		switch {
		case c == '\n' && cr: // the end of a "\r\n" line end
		case !s.started:
			s.endEvent() // a blank line
		default:
			s.started, s.prefix = false, 0
			if s.str != strNone {
				s.broken = true
			}
		}
		return false
	}
	s.started, s.eventStarted = true, true
	if s.prefix < 0 {
		return false
	}
	if s.prefix < len("data:") {
		if c != "data:"[s.prefix] {
			s.prefix = -1
			return false
		}
		s.prefix++
		return false
	}
	return !s.broken
}

// endEvent ends the event at a blank line: the JSON state goes, and s stops
// once the event has given what it looks for.
func (s *IdentityScanner) endEvent() {
	if !s.eventStarted {
		return
	}
	s.events++
	s.eventStarted = false
	s.depth, s.objects, s.in, s.wantKey, s.str, s.esc, s.pending = 0, 0, 0, false, strNone, false, fieldNone
	s.broken = false
	if s.idN > 0 || s.modelN > 0 || s.events >= maxIdentityEvents {
		s.done = true
	}
}

// json follows the event's JSON through c.
func (s *IdentityScanner) json(c byte) {
	if s.str != strNone {
		s.inString(c)
		return
	}
	switch c {
	case ' ', '\t':
		return
	case ':':
		s.wantKey = false
		return
	case '"':
		switch {
		case s.wantKey:
			s.str, s.n = strKey, 0
		case s.pending == fieldID || s.pending == fieldModel:
			s.str, s.n = strValue, 0
		default:
			s.str = strSkip
		}
		s.wantKey = false
		return
	}
	pending := s.pending
	s.pending = fieldNone
	switch c {
	case '{', '[':
		s.depth++
		if s.depth <= 64 {
			bit := uint64(1) << (s.depth - 1)
			if c == '{' {
				s.objects |= bit
			} else {
				s.objects &^= bit
			}
		}
		if c == '{' && pending == fieldIn {
			s.in = s.depth
		}
		s.wantKey = c == '{'
	case '}', ']':
		if s.depth == s.in {
			s.in = 0
		}
		s.depth = max(s.depth-1, 0)
		s.wantKey = false
	case ',':
		s.wantKey = s.depth > 0 && s.depth <= 64 && s.objects&(uint64(1)<<(s.depth-1)) != 0
	default: // a number or literal
		s.wantKey = false
	}
}

// inString follows a string's byte c: a key is matched, an id or model kept.
func (s *IdentityScanner) inString(c byte) {
	if s.esc {
		s.esc = false
		s.keep(c)
		return
	}
	switch c {
	case '\\':
		s.esc = true
		s.keep(c)
	case '"':
		mode := s.str
		s.str = strNone
		switch mode {
		case strKey:
			s.pending = s.member()
		case strValue:
			s.take()
		}
	default:
		s.keep(c)
	}
}

func (s *IdentityScanner) keep(c byte) {
	if s.str == strSkip {
		return
	}
	if s.n < len(s.buf) {
		s.buf[s.n] = c
	}
	s.n++
}

// member returns which of the looked-for members the key just read opens.
func (s *IdentityScanner) member() field {
	if s.n > len(s.buf) {
		return fieldNone
	}
	key := s.buf[:s.n]
	if s.keys.In != "" && s.in == 0 {
		if s.depth == 1 && string(key) == s.keys.In {
			return fieldIn
		}
		return fieldNone
	}
	if s.depth != max(s.in, 1) {
		return fieldNone
	}
	switch string(key) {
	case s.keys.ID:
		return fieldID
	case s.keys.Model:
		return fieldModel
	}
	return fieldNone
}

// take keeps the string value just read as the id or the model, the first
// non-empty one within MaxIdentity, its escapes decoded.
func (s *IdentityScanner) take() {
	dst, dstN := &s.id, &s.idN
	if s.pending == fieldModel {
		dst, dstN = &s.model, &s.modelN
	}
	s.pending = fieldNone
	if *dstN > 0 || s.n == 0 || s.n > len(s.buf) || !validEscapes(s.buf[:s.n]) {
		return
	}
	// A decoded value is never longer than its JSON text.
	*dstN = len(appendUnescapedInner(dst[:0], s.buf[:s.n]))
}

// validEscapes reports whether every escape in the string content raw is
// one JSON allows.
func validEscapes(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' {
			_, n := unescapeAt(raw, i)
			if n == 0 {
				return false
			}
			i += n - 1
		}
	}
	return true
}
