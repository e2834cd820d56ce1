package parse

// The splice: Peek records byte ranges ("cuts") that remove each top-level session_id member
// together with exactly one adjacent comma, and AppendWithoutSessionID copies the rest.
//
//   - a member followed by a comma is cut from its key up to the next key, taking the comma
//     and the whitespace after it: {"a":1, "session_id":"x", "b":2} -> {"a":1, "b":2}
//   - a run of members that ends the object is cut from the end of the last member that stays,
//     taking the comma before the run: {"a":1, "session_id":"x"} -> {"a":1}
//   - when no member stays, everything from the first key to the last value goes: {}

// HasSessionID reports whether the body Peek scanned has any top-level session_id member,
// even a null one: whether it must be spliced before it goes upstream.
func (f *Fields) HasSessionID() bool { return f.sessionMembers > 0 }

// AppendWithoutSessionID appends body to dst with every top-level "session_id" member removed
// together with one adjacent comma, so that the result stays valid JSON; every other byte
// (whitespace, key order, escapes) is copied unchanged. body must be the body that the last
// successful Peek of f scanned, unchanged. It does not allocate when dst has room for the
// result.
func AppendWithoutSessionID(dst, body []byte, f *Fields) []byte {
	if len(body) != f.bodyLen {
		panic("BUG: parse: AppendWithoutSessionID got a body other than the one Peek scanned")
	}
	prev := 0
	for _, c := range f.cuts {
		dst = append(dst, body[prev:c.start]...)
		prev = c.end
	}
	return append(dst, body[prev:]...)
}

// nextMember is called at the key of every top-level member: it closes the cut of a preceding
// session_id member, which reaches up to this key.
func (f *Fields) nextMember(keyStart int) {
	if f.pendingCut >= 0 {
		f.addCut(span{f.pendingCut, keyStart})
		f.pendingCut = -1
	}
}

// lastMember is called at the '}' of the top-level object, after the value ending at end.
func (f *Fields) lastMember(end int) {
	if f.pendingCut < 0 {
		return
	}
	if f.lastKeptEnd < 0 {
		f.addCut(span{f.pendingCut, end})
		return
	}
	// Take the comma after the last member that stays: drop the cuts of the trailing run,
	// which all start after it, and cut from it to the end.
	n := len(f.cuts)
	for n > 0 && f.cuts[n-1].start >= f.lastKeptEnd {
		n--
	}
	f.cuts = append(f.cuts[:n], span{f.lastKeptEnd, end})
}

// addCut appends c, merging it with the previous cut when they touch.
func (f *Fields) addCut(c span) {
	if n := len(f.cuts); n > 0 && f.cuts[n-1].end == c.start {
		f.cuts[n-1].end = c.end
		return
	}
	f.cuts = append(f.cuts, c)
}

// AppendForUpstream appends body to dst as AppendWithoutSessionID does and, in the same pass,
// replaces the value of the top-level "model" member with modelJSON, which must be one JSON
// string literal with its quotes (e.g. `"claude-x"`): a deployment's own name for the model.
// When modelJSON is nil, or the body has no top-level "model" (a continuation that inherits
// its model), nothing is replaced or added. Every other byte is copied unchanged. body must be
// the body that the last successful Peek of f scanned, unchanged. It does not allocate when dst
// has room for the result.
func AppendForUpstream(dst, body []byte, f *Fields, modelJSON []byte) []byte {
	if len(body) != f.bodyLen {
		panic("BUG: parse: AppendForUpstream got a body other than the one Peek scanned")
	}
	m := f.model
	if modelJSON == nil || m.end == 0 {
		return AppendWithoutSessionID(dst, body, f)
	}
	prev := 0
	for _, c := range f.cuts {
		// The model's value is never inside a cut: cuts hold session_id members only.
		if m.end != 0 && m.start < c.start {
			dst = append(append(dst, body[prev:m.start]...), modelJSON...)
			prev, m = m.end, span{}
		}
		dst = append(dst, body[prev:c.start]...)
		prev = c.end
	}
	if m.end != 0 {
		dst = append(append(dst, body[prev:m.start]...), modelJSON...)
		prev = m.end
	}
	return append(dst, body[prev:]...)
}
