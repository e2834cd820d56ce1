package parse

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends the value of the JSON string literal raw (with its quotes) to dst,
// decoding escapes as encoding/json does: a \u surrogate pair becomes one rune, a lone
// surrogate becomes U+FFFD. Unlike encoding/json it passes invalid UTF-8 through unchanged.
// It returns dst and ErrSyntax when raw is not exactly one valid JSON string literal.
// It does not allocate when dst has room for the value.
func AppendUnescaped(dst, raw []byte) ([]byte, error) {
	inner, escaped, ok := stringInner(raw)
	if !ok {
		return dst, ErrSyntax
	}
	if !escaped {
		return append(dst, inner...), nil
	}
	return appendUnescapedInner(dst, inner), nil
}

// StringValue returns the value of the JSON string literal raw (with its quotes), decoded as
// AppendUnescaped does. When raw has no escapes the result is the bytes between the quotes,
// not a copy, and dst is untouched; otherwise the value is appended to dst and the result is
// that appended part. It returns ErrSyntax when raw is not exactly one valid JSON string
// literal. It does not allocate when dst has room for the value.
func StringValue(dst, raw []byte) ([]byte, error) {
	inner, escaped, ok := stringInner(raw)
	if !ok {
		return nil, ErrSyntax
	}
	if !escaped {
		return inner, nil
	}
	out := appendUnescapedInner(dst, inner)
	return out[len(dst):len(out):len(out)], nil
}

// stringInner validates the string literal raw and returns the bytes between its quotes.
func stringInner(raw []byte) (inner []byte, escaped, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false, false
	}
	end, escaped, err := scanString(raw, 0)
	if err != nil || end != len(raw) {
		return nil, false, false
	}
	return raw[1 : end-1], escaped, true
}

// appendUnescapedInner appends the decoded content of a validated string literal, given
// without its quotes.
func appendUnescapedInner(dst, s []byte) []byte {
	for {
		j := bytes.IndexByte(s, '\\')
		if j < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:j]...)
		r, n := unescapeAt(s, j)
		if n == 0 {
			panic("BUG: parse: invalid escape in a string that was validated")
		}
		dst = utf8.AppendRune(dst, r)
		s = s[j+n:]
	}
}

// unescapeAt decodes the escape sequence at s[i], a backslash, the way encoding/json does.
// It returns the rune and the length of the sequence, or a length of 0 when it is invalid.
func unescapeAt(s []byte, i int) (rune, int) {
	if i+1 >= len(s) {
		return 0, 0
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return rune(c), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		return unescapeU(s, i)
	}
	return 0, 0
}

// unescapeU decodes \uXXXX at s[i], joining a surrogate pair written as two escapes.
func unescapeU(s []byte, i int) (rune, int) {
	if i+6 > len(s) {
		return 0, 0
	}
	r := hex4(s[i+2 : i+6])
	if r < 0 {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
		if r2 := hex4(s[i+8 : i+12]); r2 >= 0 {
			if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
				return pair, 12
			}
		}
	}
	return utf8.RuneError, 6
}

// keyEqual reports whether the content of a string literal, given without its quotes, decodes
// to key. It does not allocate. Every escape is longer than what it decodes to, so raw
// shorter than key never matches and raw as long as key matches only without escapes.
func keyEqual(raw []byte, key string) bool {
	switch {
	case len(raw) < len(key):
		return false
	case len(raw) == len(key):
		return string(raw) == key && bytes.IndexByte(raw, '\\') < 0
	}
	for {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			return string(raw) == key
		}
		if len(key) < j || string(raw[:j]) != key[:j] {
			return false
		}
		r, n := unescapeAt(raw, j)
		if n == 0 {
			return false
		}
		var enc [utf8.UTFMax]byte
		w := utf8.EncodeRune(enc[:], r)
		if len(key) < j+w || string(enc[:w]) != key[j:j+w] {
			return false
		}
		key = key[j+w:]
		raw = raw[j+n:]
	}
}
