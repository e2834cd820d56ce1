package parse

import "bytes"

// Fields holds what routing needs from a JSON request body. The zero value is ready to use;
// Peek resets it, and Reset drops its references to a body (e.g. before it goes back to a
// sync.Pool) while keeping its buffers. Not safe for concurrent use.
//
// The byte slices point into the body, or into Fields' own buffer when a JSON string had
// escapes; they are valid while the body is unchanged and until the next Peek or Reset.
type Fields struct {
	Model              []byte // value of top-level "model"; nil when absent
	SessionID          []byte // value of top-level "session_id"; nil when absent or null
	PreviousResponseID []byte // value of top-level "previous_response_id"; nil when absent or null
	Stream             bool   // top-level "stream" is the literal true
	NoStore            bool   // top-level "store" is the literal false (Responses create)
	// RawPrompt is the value of top-level "prompt" as written (a string keeps its quotes
	// and escapes), for the images handler to check; nil when absent.
	RawPrompt []byte

	// Raw values of the last member of each key; the zero span is absent.
	model, sessionID, previousResponseID, stream, store, prompt span
	// streamOptions' value, and include_usage's inside it when it is an object with one;
	// optsMembers: that object has members (see askusage.go).
	streamOptions, includeUsage span
	optsMembers                 bool
	ask                         usageAsk
	includesUsage               bool
	objEnd                      int // index of the top-level object's '}'

	sessionMembers int    // number of top-level session_id members
	seen           uint8  // bit 1<<fieldKey for each key met so far
	cuts           []span // what AppendWithoutSessionID leaves out: ascending, disjoint
	lastKeptEnd    int    // while scanning: end of the last member that stays, or -1
	pendingCut     int    // while scanning: start of a session_id member awaiting its comma, or -1
	bodyLen        int    // length of the body Peek scanned
	nest           nesting
	buf            []byte // unescaped values
}

// span is the byte range [start, end) of a body. The zero span means absent: no member value
// starts at 0, since a body that is an object starts with '{' or whitespace.
type span struct{ start, end int }

func (s span) of(b []byte) []byte {
	if s.end == 0 {
		return nil
	}
	return b[s.start:s.end]
}

// Reset clears f, dropping every reference to the last body and keeping buffers for reuse.
func (f *Fields) Reset() {
	f.Model, f.SessionID, f.PreviousResponseID, f.Stream = nil, nil, nil, false
	f.NoStore, f.RawPrompt = false, nil
	f.model, f.sessionID, f.previousResponseID, f.stream = span{}, span{}, span{}, span{}
	f.store, f.prompt = span{}, span{}
	f.streamOptions, f.includeUsage, f.optsMembers, f.objEnd = span{}, span{}, false, 0
	f.ask, f.includesUsage = askAddOptions, false
	f.sessionMembers, f.seen = 0, 0
	f.cuts = f.cuts[:0]
	f.lastKeptEnd, f.pendingCut = -1, -1
	f.bodyLen = 0
	f.buf = f.buf[:0]
}

// Peek scans body, which must be one JSON object with optional whitespace around it, and
// fills f, in one pass over the body. It validates the whole body as encoding/json does (RFC 8259, nesting at most 10000
// deep, strings may hold invalid UTF-8) and returns a *SyntaxError for malformed JSON
// (including trailing data), ErrNotObject when the top level is not an object, and
// ErrModelType, ErrSessionIDType or ErrPreviousResponseIDType when "model" is not a string or
// "session_id" or "previous_response_id" is neither a string nor null. Only top-level members
// count. Keys are compared after unescaping, so "mod\u0065l" is "model". A body in which
// "model", "session_id", "previous_response_id", "stream", "store" or "prompt" appears more
// than once, counting every spelling that unescapes and case-folds to it, or only as a case
// variant such as "MODEL", gets a *DuplicateFieldError (see keys.go for why). On error f is
// left reset.
//
// Peek does not allocate once f's buffers have grown to what the bodies need.
func Peek(body []byte, f *Fields) error {
	f.Reset()
	err := f.peek(body)
	if err != nil {
		f.Reset()
	}
	return err
}

func (f *Fields) peek(body []byte) error {
	f.bodyLen = len(body)
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return ErrNotObject
	}
	i, err := f.scanMembers(body, i+1)
	if err != nil {
		return err
	}
	if i = skipWS(body, i); i < len(body) {
		return syntaxError(i, "unexpected data after the top-level object")
	}
	return f.finish(body)
}

// scanMembers scans the top-level object from just past its '{' and returns the index just
// past its '}'.
func (f *Fields) scanMembers(b []byte, i int) (int, error) {
	if i = skipWS(b, i); i < len(b) && b[i] == '}' {
		f.objEnd = i
		return i + 1, nil
	}
	for {
		key, exact, valueStart, err := scanMemberKey(b, i)
		if err != nil {
			return valueStart, err
		}
		if err = f.once(key, exact); err != nil {
			return i, err
		}
		end, err := skipValue(b, valueStart, &f.nest)
		if err != nil {
			return end, err
		}
		if key == keyStreamOptions {
			if err = f.streamOptionsValue(b, span{valueStart, end}); err != nil {
				return i, err
			}
		}
		f.member(key, i, span{valueStart, end})
		var closed bool
		if i, closed, err = afterElement(b, end, '}'); err != nil || closed {
			if closed {
				f.lastMember(end)
				f.objEnd = i - 1
			}
			return i, err
		}
	}
}

// once refuses a second member of a key Peek reads, or one spelled as a case variant.
func (f *Fields) once(key fieldKey, exact bool) error {
	if key == keyOther {
		return nil
	}
	bit := uint8(1) << key
	if f.seen&bit != 0 {
		return &DuplicateFieldError{Field: key.String()}
	}
	f.seen |= bit
	if !exact {
		return &DuplicateFieldError{Field: key.String(), Variant: true}
	}
	return nil
}

// member records the top-level member whose key starts at keyStart.
func (f *Fields) member(key fieldKey, keyStart int, value span) {
	f.nextMember(keyStart)
	switch key {
	case keyModel:
		f.model = value
	case keySessionID:
		f.sessionID = value
		f.sessionMembers++
		f.pendingCut = keyStart
		return
	case keyPreviousResponseID:
		f.previousResponseID = value
	case keyStream:
		f.stream = value
	case keyStore:
		f.store = value
	case keyPrompt:
		f.prompt = value
	case keyStreamOptions:
		f.streamOptions = value
	}
	f.lastKeptEnd = value.end
}

// scanMemberKey scans `"key" :` at b[i] and returns which key it is, whether it is spelled
// exactly, and where its value starts.
func scanMemberKey(b []byte, i int) (fieldKey, bool, int, error) {
	if i >= len(b) || b[i] != '"' {
		return keyOther, false, i, syntaxError(i, "expected a string key")
	}
	end, escaped, err := scanString(b, i)
	if err != nil {
		return keyOther, false, end, err
	}
	key, exact := whichKey(b[i+1:end-1], escaped)
	if end = skipWS(b, end); end >= len(b) || b[end] != ':' {
		return keyOther, false, end, syntaxError(end, "expected ':' after object key")
	}
	return key, exact, skipWS(b, end+1), nil
}

// finish checks the types of the recorded values and sets the exported fields.
func (f *Fields) finish(b []byte) error {
	model, session, previous := f.model.of(b), f.sessionID.of(b), f.previousResponseID.of(b)
	if model != nil && model[0] != '"' {
		return ErrModelType
	}
	if session = nullToNil(session); session != nil && session[0] != '"' {
		return ErrSessionIDType
	}
	if previous = nullToNil(previous); previous != nil && previous[0] != '"' {
		return ErrPreviousResponseIDType
	}
	f.Stream = string(f.stream.of(b)) == "true"
	f.NoStore = string(f.store.of(b)) == "false"
	f.RawPrompt = f.prompt.of(b)
	// Decoded values are never longer than their literals, so with this much room no append
	// below moves f.buf, and the slices taken from it stay valid.
	if need := escapedLen(model) + escapedLen(session) + escapedLen(previous); cap(f.buf) < need {
		f.buf = make([]byte, 0, need)
	}
	f.Model = f.stringValue(model)
	f.SessionID = f.stringValue(session)
	f.PreviousResponseID = f.stringValue(previous)
	return nil
}

// escapedLen returns the length of a string literal that has escapes, or 0.
func escapedLen(v []byte) int {
	if bytes.IndexByte(v, '\\') < 0 {
		return 0
	}
	return len(v)
}

func nullToNil(v []byte) []byte {
	if string(v) == "null" {
		return nil
	}
	return v
}

// stringValue decodes a validated string literal, into f.buf when it has escapes.
func (f *Fields) stringValue(raw []byte) []byte {
	if raw == nil {
		return nil
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	start := len(f.buf)
	f.buf = appendUnescapedInner(f.buf, inner)
	return f.buf[start:len(f.buf):len(f.buf)]
}
