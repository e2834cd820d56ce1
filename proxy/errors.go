package proxy

import (
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Error is a failure answered to the client: the HTTP status, the message the
// client reads, and the internal cause that is logged but never shown.
type Error struct {
	Status  int
	Message string
	// Param and Code fill the beta error body's param and code fields when set.
	Param string
	Code  string
	// Reason labels the rejection in metrics and logs (e.g. "idempotency_key").
	Reason string
	Cause  error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

func errorf(status int, reason, msg string) *Error {
	return &Error{Status: status, Message: msg, Reason: reason}
}

// alphaErrorType maps a status to the Anthropic error type.
func alphaErrorType(status int) string {
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

// betaErrorType maps a status to the OpenAI error type.
func betaErrorType(status int) string {
	switch {
	case status == 401:
		return "invalid_request_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// gammaStatus maps a status to the google.rpc status name.
func gammaStatus(status int) string {
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

// appendErrorBody appends the family-native JSON error body for e.
func appendErrorBody(dst []byte, fam Family, e *Error, requestID []byte) []byte {
	switch fam {
	case Alpha:
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = appendJSONString(dst, alphaErrorType(e.Status))
		dst = append(dst, `,"message":`...)
		dst = appendJSONString(dst, e.Message)
		dst = append(dst, `},"request_id":`...)
		dst = appendJSONString(dst, b2s(requestID))
		return append(dst, '}')
	case Gamma:
		dst = append(dst, `{"error":{"code":`...)
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
		dst = append(dst, `,"message":`...)
		dst = appendJSONString(dst, e.Message)
		dst = append(dst, `,"status":`...)
		dst = appendJSONString(dst, gammaStatus(e.Status))
		return append(dst, `}}`...)
	default:
		dst = append(dst, `{"error":{"message":`...)
		dst = appendJSONString(dst, e.Message)
		dst = append(dst, `,"type":`...)
		dst = appendJSONString(dst, betaErrorType(e.Status))
		dst = append(dst, `,"param":`...)
		dst = appendJSONStringOrNull(dst, e.Param)
		dst = append(dst, `,"code":`...)
		dst = appendJSONStringOrNull(dst, e.Code)
		return append(dst, `}}`...)
	}
}

// writeError answers e in the family's native shape. Rejections are final, so
// the SDKs are told not to retry them.
func writeError(ctx *fasthttp.RequestCtx, fam Family, e *Error, requestID []byte) {
	resp := &ctx.Response
	resp.ResetBody()
	resp.SetStatusCode(e.Status)
	resp.Header.SetContentType("application/json")
	if e.Status < 500 && e.Status != 408 && e.Status != 409 && e.Status != 429 {
		resp.Header.Set("x-should-retry", "false")
	}
	resp.SetBodyRaw(appendErrorBody(resp.Body()[:0], fam, e, requestID))
}

// appendStreamError appends the frame that ends a stream the family's way after
// the upstream failed mid-stream.
func appendStreamError(dst []byte, fam Family, responses bool, msg string) []byte {
	switch {
	case fam == Alpha:
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"...)
		dst = appendJSONString(dst, msg)
		return append(dst, "}}\n\n"...)
	case responses:
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":"...)
		dst = appendJSONString(dst, msg)
		return append(dst, ",\"param\":null}\n\n"...)
	case fam == Gamma:
		dst = append(dst, "data: {\"error\":{\"code\":502,\"message\":"...)
		dst = appendJSONString(dst, msg)
		return append(dst, ",\"status\":\"UNAVAILABLE\"}}\n\n"...)
	default:
		dst = append(dst, "data: {\"error\":{\"message\":"...)
		dst = appendJSONString(dst, msg)
		return append(dst, ",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"...)
	}
}

func appendJSONStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
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
