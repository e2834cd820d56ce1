package parse

import "encoding/binary"

// Member returns the raw bytes of the value of the top-level key in the JSON object obj, e.g.
// `"abc"`, `{...}` or `123`, or nil when obj has no such member. Keys are compared after
// unescaping; when a key repeats, its last member wins, as in encoding/json. Member does not
// allocate.
//
// Member does not validate obj: it finds the structure by skipping strings and counting
// brackets, and returns nil when that structure is broken (not an object, cut short). It is
// meant for JSON that an upstream produced, e.g. the "id" of a Responses answer, or chained
// for an SSE event: Member(Member(data, "response"), "id").
func Member(obj []byte, key string) []byte {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	if i = skipWS(obj, i+1); i < len(obj) && obj[i] == '}' {
		return nil
	}
	var found []byte
	for {
		if i >= len(obj) || obj[i] != '"' {
			return nil
		}
		end, escaped := skipStringLoose(obj, i)
		if end < 0 {
			return nil
		}
		k := obj[i+1 : end-1]
		match := (!escaped && string(k) == key) || (escaped && keyEqual(k, key))
		if i = skipWS(obj, end); i >= len(obj) || obj[i] != ':' {
			return nil
		}
		start := skipWS(obj, i+1)
		if end = skipValueLoose(obj, start); end < 0 {
			return nil
		}
		if match {
			found = obj[start:end]
		}
		if i = skipWS(obj, end); i >= len(obj) {
			return nil
		}
		switch obj[i] {
		case ',':
			i = skipWS(obj, i+1)
		case '}':
			return found
		default:
			return nil
		}
	}
}

// skipStringLoose returns the index just past the string literal whose opening quote is at
// b[i], or -1 when it is not closed, and whether it holds escapes. It only looks for the
// closing quote, stepping over escapes.
func skipStringLoose(b []byte, i int) (end int, escaped bool) {
	i++
	for {
		for i+8 <= len(b) && !hasQuoteOrBackslash(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return -1, escaped
		}
		if b[i] == '"' {
			return i + 1, escaped
		}
		escaped = true
		i += 2 // the backslash and the byte it escapes
	}
}

// hasQuoteOrBackslash reports whether any of the 8 bytes in x is '"' or '\\'.
func hasQuoteOrBackslash(x uint64) bool {
	q := x ^ (lsb * '"')
	s := x ^ (lsb * '\\')
	return ((q-lsb)&^q|(s-lsb)&^s)&msb != 0
}

// skipValueLoose returns the index just past the value at b[i], or -1 when there is none
// or it is not closed. Containers are skipped by counting brackets outside strings; scalars
// run up to the next delimiter.
func skipValueLoose(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipStringLoose(b, i)
		return end
	case '{', '[':
		return skipContainerLoose(b, i)
	}
	start := i
	for i < len(b) && !valueDelim[b[i]] {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// valueDelim marks the bytes that end a scalar.
var valueDelim = func() (t [256]bool) {
	for _, c := range []byte(",}] \t\n\r:{[\"") {
		t[c] = true
	}
	return t
}()

func skipContainerLoose(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		for i < len(b) && !containerStop[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			if i, _ = skipStringLoose(b, i); i < 0 {
				return -1
			}
			continue
		case '{', '[':
			depth++
		default: // '}', ']'
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// containerStop marks the bytes that skipContainerLoose acts on.
var containerStop = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}
