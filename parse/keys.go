package parse

import (
	"unicode"
	"unicode/utf8"
)

// Which top-level keys Peek reads, and how it tells them apart from every other key.
//
// A provider's decoder may take the first member of a repeated key where the gateway took the
// last, and decoders such as Go's encoding/json match keys without regard to case, folding
// Unicode as well (the Kelvin sign U+212A is "k", the long s U+017F is "s"). So a body in
// which one of these keys appears twice, in any spelling that unescapes and folds to it, means
// different things to different readers; so does a single member spelled as a case variant
// ("MODEL"), which folding decoders take for the key and exact ones do not. Peek refuses both
// with a *DuplicateFieldError. A key written with escapes only ("mod\u0065l") unescapes to the
// key for every decoder and is accepted.

// fieldKey names the top-level keys that Peek reads.
type fieldKey uint8

const (
	keyOther fieldKey = iota
	keyModel
	keySessionID
	keyPreviousResponseID
	keyStream
	keyStore  // read by the Responses create handler
	keyPrompt // read by the images handler
	// keyStreamOptions holds include_usage, which the gateway reads and may set (askusage.go)
	keyStreamOptions
	numKeys
)

// Peek's seen is a uint8 with a bit per key but keyOther: this fails to compile past 8.
const _ = uint8(1 << (numKeys - 1))

// keyNames are the exact spellings, indexed by fieldKey.
var keyNames = [numKeys]string{"", "model", "session_id", "previous_response_id", "stream", "store", "prompt",
	"stream_options"}

func (k fieldKey) String() string { return keyNames[k] }

// whichKey matches the content of a key literal. exact is false when the key only folds to
// the name (a case variant). Keys are decoded as they are compared; exact spellings take the
// first switch, and any other key is compared only when its first byte and length allow it.
func whichKey(raw []byte, escaped bool) (key fieldKey, exact bool) {
	switch string(raw) {
	case "model":
		return keyModel, true
	case "session_id":
		return keySessionID, true
	case "previous_response_id":
		return keyPreviousResponseID, true
	case "stream":
		return keyStream, true
	case "store":
		return keyStore, true
	case "prompt":
		return keyPrompt, true
	case "stream_options":
		return keyStreamOptions, true
	}
	if !mayFold(raw, escaped) {
		return keyOther, false
	}
	first := raw[0] | 0x20 // a letter must be the name's first, in some case
	letter := 'a' <= first && first <= 'z'
	for k := keyModel; k < numKeys; k++ {
		if letter && first != keyNames[k][0] {
			continue
		}
		if ex, ok := foldEqual(raw, keyNames[k]); ok {
			return k, ex
		}
	}
	return keyOther, false
}

// mayFold is the cheap filter before foldEqual: the keys are at least 5 letters long and
// start with m, p or s in some case, or with what a decoder may skip or decode to one of
// them (a delimiter, an escape, a non-ASCII letter such as the long s).
func mayFold(raw []byte, escaped bool) bool {
	if len(raw) < 5 {
		return false
	}
	switch c := raw[0]; {
	case c >= utf8.RuneSelf || c == '\\' || c == '_' || c == '-':
		return true
	default:
		c |= 0x20
		return c == 'm' || c == 'p' || c == 's'
	}
}

// foldEqual reports whether the content of a valid key literal decodes and folds to name
// (lower-case ASCII) the loosest way a decoder matches names: case-folded as encoding/json
// does, and ignoring underscores and dashes as encoding/json/v2 does for case-insensitive
// names ("previousResponseId"). exact reports whether it decodes to name exactly. It does
// not allocate.
func foldEqual(raw []byte, name string) (exact, ok bool) {
	j := 0
	for i := 0; i < len(raw); {
		r, n := rune(raw[i]), 1
		switch {
		case raw[i] == '\\':
			if r, n = unescapeAt(raw, i); n == 0 {
				return false, false
			}
		case raw[i] >= utf8.RuneSelf:
			r, n = utf8.DecodeRune(raw[i:])
		}
		i += n
		if r == '_' || r == '-' {
			continue
		}
		for j < len(name) && name[j] == '_' {
			j++
		}
		if j >= len(name) || foldRune(r) != foldRune(rune(name[j])) {
			return false, false
		}
		j++
	}
	for j < len(name) && name[j] == '_' {
		j++
	}
	if j != len(name) {
		return false, false
	}
	return keyEqual(raw, name), true
}

// foldRune returns the smallest rune of r's case-folding orbit, as encoding/json does.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
