package accesslog

import (
	"time"
	"unicode"
	"unicode/utf8"
)

// The encoding of values below follows Go 1.26's log/slog (handler.go,
// text_handler.go, json_handler.go) value for value; the differential tests
// and FuzzAccessLine hold it to slog's bytes.

// appendRFC3339Millis appends t as slog's TextHandler writes the time:
// RFC 3339 with exactly three digits of milliseconds, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond added
	// keeps four digits after the period, the fourth dropped.
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}

// appendJSONTime appends t as slog's JSONHandler writes the time: quoted
// RFC3339Nano, after slog's error text when the year has not four digits.
func appendJSONTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y >= 10000 {
		b = append(b, `"!ERROR:time.Time year outside of range [0,9999]"`...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// textPlain holds true for the ASCII bytes slog's TextHandler writes
// unquoted: those JSON need not escape, and the backslash, but space and '='.
var textPlain = func() (t [256]bool) {
	for b := range utf8.RuneSelf {
		t[b] = b == '\\' || (b != ' ' && b != '=' && safeSet[b])
	}
	return t
}()

// needsQuoting reports whether slog's TextHandler quotes s.
func needsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	i := 0
	for i < len(s) && textPlain[s[i]] {
		i++
	}
	// slog's loop, from the first byte that is not plain ASCII.
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			// Anything but a backslash that JSON would escape, and
			// space and '='.
			if b != '\\' && (b == ' ' || b == '=' || !safeSet[b]) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// appendEscapedJSONString appends s escaped as slog's JSONHandler escapes
// a string, without the quotes: control bytes, '"' and '\\' escaped, each
// byte of invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and \u2029.
func appendEscapedJSONString(buf []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			i++
			if !safeSet[b] {
				buf = appendEscapedByte(append(buf, s[start:i-1]...), b)
				start = i
			}
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			buf = append(append(buf, s[start:i]...), `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			// Valid JSON, but not in JSONP: escaped, as slog does.
			buf = append(append(buf, s[start:i]...), `\u202`...)
			buf = append(buf, hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(buf, s[start:]...)
}

// appendEscapedByte appends the JSON escape of the ASCII byte b that
// safeSet does not hold.
func appendEscapedByte(buf []byte, b byte) []byte {
	buf = append(buf, '\\')
	switch b {
	case '\\', '"':
		return append(buf, b)
	case '\n':
		return append(buf, 'n')
	case '\r':
		return append(buf, 'r')
	case '\t':
		return append(buf, 't')
	}
	// The other bytes below 0x20.
	return append(buf, 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

const hex = "0123456789abcdef"

// Copied from log/slog, which copied it from encoding/json/tables.go.
//
// safeSet holds the value true if the ASCII character with the given array
// position can be represented inside a JSON string without any further
// escaping.
//
// All values are true except for the ASCII control characters (0-31), the
// double quote ("), and the backslash character ("\").
var safeSet = [utf8.RuneSelf]bool{
	' ':      true,
	'!':      true,
	'"':      false,
	'#':      true,
	'$':      true,
	'%':      true,
	'&':      true,
	'\'':     true,
	'(':      true,
	')':      true,
	'*':      true,
	'+':      true,
	',':      true,
	'-':      true,
	'.':      true,
	'/':      true,
	'0':      true,
	'1':      true,
	'2':      true,
	'3':      true,
	'4':      true,
	'5':      true,
	'6':      true,
	'7':      true,
	'8':      true,
	'9':      true,
	':':      true,
	';':      true,
	'<':      true,
	'=':      true,
	'>':      true,
	'?':      true,
	'@':      true,
	'A':      true,
	'B':      true,
	'C':      true,
	'D':      true,
	'E':      true,
	'F':      true,
	'G':      true,
	'H':      true,
	'I':      true,
	'J':      true,
	'K':      true,
	'L':      true,
	'M':      true,
	'N':      true,
	'O':      true,
	'P':      true,
	'Q':      true,
	'R':      true,
	'S':      true,
	'T':      true,
	'U':      true,
	'V':      true,
	'W':      true,
	'X':      true,
	'Y':      true,
	'Z':      true,
	'[':      true,
	'\\':     false,
	']':      true,
	'^':      true,
	'_':      true,
	'`':      true,
	'a':      true,
	'b':      true,
	'c':      true,
	'd':      true,
	'e':      true,
	'f':      true,
	'g':      true,
	'h':      true,
	'i':      true,
	'j':      true,
	'k':      true,
	'l':      true,
	'm':      true,
	'n':      true,
	'o':      true,
	'p':      true,
	'q':      true,
	'r':      true,
	's':      true,
	't':      true,
	'u':      true,
	'v':      true,
	'w':      true,
	'x':      true,
	'y':      true,
	'z':      true,
	'{':      true,
	'|':      true,
	'}':      true,
	'~':      true,
	'\u007f': true,
}
