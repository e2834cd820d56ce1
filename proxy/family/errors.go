package family

import (
	"strconv"
	"unicode/utf8"
)

// AlphaErrorType returns the Anthropic error type of an HTTP status.
func AlphaErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 409:
		return "conflict_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// BetaErrorType returns the OpenAI error type of an HTTP status. A rate
// limit's type names the limit that was hit; "requests" is the one the
// gateway and the simulator use.
func BetaErrorType(status int) string {
	switch {
	case status == 429:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// GammaStatus returns the google.rpc status name of an HTTP status.
func GammaStatus(status int) string {
	switch status {
	case 400, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ALREADY_EXISTS"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// ErrorBody is what a family-native error body says. Param and Code fill the
// beta body's param and code fields when set (null otherwise); the other
// families have no place for them.
type ErrorBody struct {
	Status  int
	Message string
	Param   string
	Code    string
	// Type, when set, is the beta body's type of a 429 ("requests" or
	// "tokens", the limit that was hit).
	Type string
	// RetryDelay, when positive, is the seconds a gamma 429 tells the client
	// to wait, in a google.rpc.RetryInfo detail as Gemini sends it.
	RetryDelay int
}

// AppendErrorBody appends the family-native JSON error body for e. The alpha
// body carries requestID.
func AppendErrorBody(dst []byte, f Family, e ErrorBody, requestID []byte) []byte {
	switch f {
	case Alpha:
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = AppendJSONString(dst, AlphaErrorType(e.Status))
		dst = append(dst, `,"message":`...)
		dst = AppendJSONString(dst, e.Message)
		dst = append(dst, `},"request_id":`...)
		dst = AppendJSONString(dst, b2s(requestID))
		return append(dst, '}')
	case Gamma:
		dst = append(dst, `{"error":{"code":`...)
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
		dst = append(dst, `,"message":`...)
		dst = AppendJSONString(dst, e.Message)
		dst = append(dst, `,"status":`...)
		dst = AppendJSONString(dst, GammaStatus(e.Status))
		if e.Status == 429 && e.RetryDelay > 0 {
			dst = append(dst, `,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"`...)
			dst = strconv.AppendInt(dst, int64(e.RetryDelay), 10)
			dst = append(dst, `s"}]`...)
		}
		return append(dst, `}}`...)
	default:
		dst = append(dst, `{"error":{"message":`...)
		dst = AppendJSONString(dst, e.Message)
		dst = append(dst, `,"type":`...)
		typ := BetaErrorType(e.Status)
		if e.Status == 429 && e.Type != "" {
			typ = e.Type
		}
		dst = AppendJSONString(dst, typ)
		dst = append(dst, `,"param":`...)
		dst = appendJSONStringOrNull(dst, e.Param)
		dst = append(dst, `,"code":`...)
		dst = appendJSONStringOrNull(dst, e.Code)
		return append(dst, `}}`...)
	}
}

// AppendStreamError appends the frame that ends a stream the family's way
// after the upstream failed mid-stream; responses selects the Responses
// stream's error event.
func AppendStreamError(dst []byte, f Family, responses bool, msg string) []byte {
	switch {
	case f == Alpha:
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"...)
		dst = AppendJSONString(dst, msg)
		return append(dst, "}}\n\n"...)
	case responses:
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":"...)
		dst = AppendJSONString(dst, msg)
		return append(dst, ",\"param\":null}\n\n"...)
	case f == Gamma:
		dst = append(dst, "data: {\"error\":{\"code\":502,\"message\":"...)
		dst = AppendJSONString(dst, msg)
		return append(dst, ",\"status\":\"UNAVAILABLE\"}}\n\n"...)
	default:
		dst = append(dst, "data: {\"error\":{\"message\":"...)
		dst = AppendJSONString(dst, msg)
		return append(dst, ",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"...)
	}
}

func appendJSONStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendJSONString(dst, s)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string literal, as every body the
// gateway writes itself quotes its strings. Invalid UTF-8 becomes U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = appendJSONByte(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// appendJSONByte appends the ASCII byte c as it stands in a JSON string.
func appendJSONByte(dst []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(dst, '\\', c)
	case c == '\n':
		return append(dst, '\\', 'n')
	case c == '\r':
		return append(dst, '\\', 'r')
	case c == '\t':
		return append(dst, '\\', 't')
	case c < 0x20 || c == '<' || c == '>' || c == '&':
		return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return append(dst, c)
}
