package parse

import "bytes"

// Asking a beta chat stream for its usage on the client's behalf: a stream whose usage the
// gateway must charge but whose client did not ask for it gets stream_options.include_usage
// set to true by a splice (AppendAskingUsage), and what the provider then adds to the stream
// is taken out again, event by event (IsAddedUsageEvent, AppendWithoutUsageNull).
//
// Peek records the top-level stream_options value and, when it is an object, the value of its
// include_usage member. The gateway decides on that value, so a second include_usage, or one
// spelled as a case variant, is refused as the top-level keys are (keys.go); stream_options
// itself is one of those keys. AppendAskingUsage then edits the one place that needs it:
//
//   - no stream_options: "stream_options":{"include_usage":true} is added as the last member;
//   - stream_options is null: {"include_usage":true} goes in its place;
//   - stream_options is an object without include_usage: "include_usage":true is added as its
//     first member;
//   - include_usage is false or null: true goes in its place.
//
// include_usage already true needs nothing (IncludesUsage), and a stream_options or an
// include_usage of another type is left for the provider to refuse (CanAskUsage is false).

// usageAsk is the edit AppendAskingUsage makes.
type usageAsk uint8

const (
	askAddOptions usageAsk = iota // no stream_options: the zero value, as Reset leaves it
	askSetOptions                 // stream_options is null
	askAddMember                  // stream_options is an object without include_usage
	askSetValue                   // include_usage is false or null
	askNone                       // include_usage is true, or a type the provider refuses
)

const includeUsageName = "include_usage"

var (
	addOptions = []byte(`,"stream_options":{"include_usage":true}`) // without its comma when no member stays
	setOptions = []byte(`{"include_usage":true}`)
	addMember  = []byte(`"include_usage":true,`) // without its comma in an empty object
	setValue   = []byte(`true`)
)

// streamOptionsValue records what AppendAskingUsage must do with the top-level stream_options
// value v, which Peek has validated, and refuses a second include_usage or a case variant of
// it.
func (f *Fields) streamOptionsValue(b []byte, v span) error {
	switch b[v.start] {
	case 'n':
		f.ask = askSetOptions
		return nil
	case '{':
	default:
		f.ask = askNone
		return nil
	}
	f.ask = askAddMember
	obj, found := b[v.start:v.end], false
	for key, val, end := nextMember(obj, -1); end >= 0; key, val, end = nextMember(obj, end) {
		f.optsMembers = true
		exact, ok := string(key) == includeUsageName, true
		if !exact {
			if exact, ok = foldEqual(key, includeUsageName); !ok {
				continue
			}
		}
		if found {
			return &DuplicateFieldError{Field: "stream_options." + includeUsageName}
		}
		if found = true; !exact {
			return &DuplicateFieldError{Field: "stream_options." + includeUsageName, Variant: true}
		}
		switch string(val) {
		case "true":
			f.ask, f.includesUsage = askNone, true
		case "false", "null":
			f.ask, f.includeUsage = askSetValue, span{v.start + end - len(val), v.start + end}
		default:
			f.ask = askNone
		}
	}
	return nil
}

// IncludesUsage reports whether the body Peek scanned asks for a stream's usage itself:
// stream_options.include_usage is the literal true.
func (f *Fields) IncludesUsage() bool { return f.includesUsage }

// CanAskUsage reports whether AppendAskingUsage sets stream_options.include_usage in the body
// Peek scanned: it has no stream_options, a null one, or an object whose include_usage is
// absent, false or null.
func (f *Fields) CanAskUsage() bool { return f.ask != askNone }

// AppendAskingUsage appends body to dst as AppendForUpstream does (modelJSON may be nil) and,
// in the same pass, sets stream_options.include_usage to true as the file's comment says, when
// CanAskUsage. Every other byte is copied unchanged. body must be the body that the last
// successful Peek of f scanned, unchanged. It does not allocate when dst has room for the
// result.
func AppendAskingUsage(dst, body []byte, f *Fields, modelJSON []byte) []byte {
	if len(body) != f.bodyLen {
		panic("BUG: parse: AppendAskingUsage got a body other than the one Peek scanned")
	}
	var edits [2]edit
	n := 0
	if modelJSON != nil && f.model.end != 0 {
		edits[n], n = edit{f.model, modelJSON}, n+1
	}
	if e, ok := f.usageEdit(); ok {
		edits[n], n = e, n+1
		if n == 2 && edits[1].at.start < edits[0].at.start {
			edits[0], edits[1] = edits[1], edits[0]
		}
	}
	return appendEdited(dst, body, f.cuts, edits[:n])
}

// edit replaces the bytes at with text.
type edit struct {
	at   span
	text []byte
}

// usageEdit returns the edit that sets include_usage, if one is needed.
func (f *Fields) usageEdit() (edit, bool) {
	switch f.ask {
	case askAddOptions:
		text := addOptions
		if f.lastKeptEnd < 0 { // every member is cut, or there is none
			text = text[1:]
		}
		return edit{span{f.objEnd, f.objEnd}, text}, true
	case askSetOptions:
		return edit{f.streamOptions, setOptions}, true
	case askAddMember:
		text := addMember
		if !f.optsMembers {
			text = text[:len(text)-1]
		}
		at := f.streamOptions.start + 1
		return edit{span{at, at}, text}, true
	case askSetValue:
		return edit{f.includeUsage, setValue}, true
	}
	return edit{}, false
}

// appendEdited appends body to dst without the cuts (ascending, disjoint) and with the edits
// (ascending, disjoint, none inside a cut) made.
func appendEdited(dst, body []byte, cuts []span, edits []edit) []byte {
	prev := 0
	for _, c := range cuts {
		for len(edits) > 0 && edits[0].at.start <= c.start {
			dst = append(append(dst, body[prev:edits[0].at.start]...), edits[0].text...)
			prev, edits = edits[0].at.end, edits[1:]
		}
		dst = append(dst, body[prev:c.start]...)
		prev = c.end
	}
	for _, e := range edits {
		dst = append(append(dst, body[prev:e.at.start]...), e.text...)
		prev = e.at.end
	}
	return append(dst, body[prev:]...)
}

// What include_usage adds to a beta chat stream: one event before data: [DONE] whose chunk
// has an empty "choices" and a "usage" object, and a "usage":null member in every other
// chunk. In a stream's raw bytes a quote that begins a key is never escaped, so the keys
// below are found by their bytes; a string value that holds them has its quotes escaped.

var (
	choicesKey = []byte(`"choices"`)
	nullLit    = []byte("null")
)

// IsAddedUsageEvent reports whether the SSE event ev (its bytes up to the blank line that ends
// it) is the chunk that include_usage adds: its data has an empty "choices" array and a
// "usage" object.
func IsAddedUsageEvent(ev []byte) bool {
	return memberIs(ev, choicesKey, "[]") && memberIs(ev, usageKey, "{")
}

// memberIs reports whether ev has a member named key (with its quotes) whose value, after
// whitespace, begins with the bytes of want, which may be separated by whitespace.
func memberIs(ev, key []byte, want string) bool {
	for i := 0; ; {
		k := bytes.Index(ev[i:], key)
		if k < 0 {
			return false
		}
		i += k + len(key)
		if j := valueAfterColon(ev, i); j >= 0 && hasTokens(ev, j, want) {
			return true
		}
	}
}

// valueAfterColon returns where the value starts after a key ending at i: past whitespace,
// ':' and whitespace; -1 when no ':' follows.
func valueAfterColon(b []byte, i int) int {
	if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

// hasTokens reports whether b at i holds the bytes of want, whitespace allowed between them.
func hasTokens(b []byte, i int, want string) bool {
	for k := 0; k < len(want); k++ {
		if k > 0 {
			i = skipWS(b, i)
		}
		if i >= len(b) || b[i] != want[k] {
			return false
		}
		i++
	}
	return true
}

// AppendWithoutUsageNull appends ev to dst without its "usage":null members, each taken out
// with the whitespace and the comma before it (after it, when it is the first member of its
// object). dst may be ev[:0], or any slice that ends at or before ev's start in the same
// array: the bytes are moved forward as they are read. It does not allocate when dst has room.
func AppendWithoutUsageNull(dst, ev []byte) []byte {
	prev := 0
	for i := 0; ; {
		k := bytes.Index(ev[i:], usageKey)
		if k < 0 {
			break
		}
		key := i + k
		i = key + len(usageKey)
		v := valueAfterColon(ev, i)
		if v < 0 || !bytes.HasPrefix(ev[v:], nullLit) {
			continue
		}
		start, end, ok := nullMember(ev, key, v+len("null"))
		if !ok || start < prev {
			continue
		}
		dst = append(dst, ev[prev:start]...)
		prev, i = end, end
	}
	return append(dst, ev[prev:]...)
}

// nullMember returns the bytes to take out for the member whose key starts at key and whose
// null value ends at end: from the comma before it, or, when '{' comes before it, up to the
// start of the next key.
func nullMember(ev []byte, key, end int) (int, int, bool) {
	j := key - 1
	for j >= 0 && isWS(ev[j]) {
		j--
	}
	switch {
	case j < 0:
		return 0, 0, false
	case ev[j] == ',':
		return j, end, true
	case ev[j] != '{':
		return 0, 0, false
	}
	after := skipWS(ev, end)
	switch {
	case after < len(ev) && ev[after] == ',':
		return key, skipWS(ev, after+1), true
	case after < len(ev) && ev[after] == '}':
		return key, end, true
	}
	return 0, 0, false
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
