package parse

import (
	"bytes"
	"encoding/binary"
)

// This file holds the validating JSON lexer that Peek uses: whitespace, strings, numbers and
// literals, with the same grammar as encoding/json (RFC 8259), including that strings may hold
// invalid UTF-8.

// skipWS returns the index of the first byte at or after i that is not JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace[b[i]] {
		i++
	}
	return i
}

// isSpace marks JSON whitespace.
var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// stringStop marks the bytes that end a run of plain string content: the quote, the
// backslash, and the control characters that JSON forbids inside strings.
var stringStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasStop reports whether any of the 8 bytes in x is a stringStop byte. The formulas are the
// exact "has zero byte" and "has byte less than n" tests (n <= 128) of Bit Twiddling Hacks.
func hasStop(x uint64) bool {
	q := x ^ (lsb * '"')
	s := x ^ (lsb * '\\')
	return ((x-lsb*0x20)&^x|(q-lsb)&^q|(s-lsb)&^s)&msb != 0
}

// scanString validates the string literal that starts with the quote at b[i] and returns the
// index just past its closing quote, and whether it holds escapes.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	i++
	for {
		for i+8 <= len(b) && !hasStop(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && !stringStop[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, escaped, syntaxError(i, "unexpected end of input in string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			n := escapeLen(b, i)
			if n == 0 {
				return i, escaped, syntaxError(i, "invalid escape in string")
			}
			escaped = true
			i += n
		default:
			return i, escaped, syntaxError(i, "control character in string")
		}
	}
}

// escapeLen returns the length of the valid escape sequence at b[i] (a backslash), or 0.
func escapeLen(b []byte, i int) int {
	if i+1 >= len(b) {
		return 0
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+6 <= len(b) && hex4(b[i+2:i+6]) >= 0 {
			return 6
		}
	}
	return 0
}

// hex4 decodes 4 hex digits, or returns -1.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanScalar validates the number or literal that starts at b[i] and returns its end.
func scanScalar(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, syntaxError(i, "unexpected end of input")
	}
	switch b[i] {
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return scanNumber(b, i)
	}
	return i, syntaxError(i, "invalid character where a value was expected")
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, syntaxError(i, "invalid literal")
	}
	return i + len(lit), nil
}

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return i, syntaxError(i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, syntaxError(j, "invalid number")
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, syntaxError(j, "invalid number")
		}
		i = j
	}
	return i, nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// afterElement reads what follows a member or element that ends at b[end]
// inside a container closed by closer ('}' or ']'): a ',' (next is where the
// following one starts) or closer (next is just past it, and closed is true).
func afterElement(b []byte, end int, closer byte) (next int, closed bool, err error) {
	i := skipWS(b, end)
	switch {
	case i >= len(b):
		return i, false, syntaxError(i, "unexpected end of input")
	case b[i] == ',':
		return skipWS(b, i+1), false, nil
	case b[i] == closer:
		return i + 1, true, nil
	case closer == ']':
		return i, false, syntaxError(i, "expected ',' or ']' after array element")
	}
	return i, false, syntaxError(i, "expected ',' or '}' after object member")
}
