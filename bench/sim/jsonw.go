package sim

import (
	"strconv"

	"github.com/valyala/fastjson"
)

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string literal.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscaped(dst, c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendQuotedBytes is appendQuoted for a byte slice.
func appendQuotedBytes(dst, b []byte) []byte {
	return appendQuoted(dst, b2s(b))
}

func appendEscaped(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendKey appends `"key":` after a comma unless dst ends an opening brace.
func appendKey(dst []byte, key string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' && dst[n-1] != '[' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendStrField(dst []byte, key, val string) []byte {
	return appendQuoted(appendKey(dst, key), val)
}

func appendIntField(dst []byte, key string, n int64) []byte {
	return strconv.AppendInt(appendKey(dst, key), n, 10)
}

// appendRawField appends key with the raw JSON of v, or def when v is nil.
func appendRawField(dst []byte, key string, v *fastjson.Value, def string) []byte {
	dst = appendKey(dst, key)
	if v == nil {
		return append(dst, def...)
	}
	return v.MarshalTo(dst)
}

// appendNullableStr appends key with s quoted, or null when s is empty.
func appendNullableStr(dst []byte, key, s string) []byte {
	dst = appendKey(dst, key)
	if s == "" {
		return append(dst, "null"...)
	}
	return appendQuoted(dst, s)
}
