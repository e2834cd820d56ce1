package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"

	"github.com/valyala/fasthttp"
)

// What reaches a log line. fasthttp's own error texts quote the raw bytes
// they failed on ("contents: ..."), which may hold a caller's key, a cookie
// or an upstream's credentials; the same holds for the errors of an upstream
// answer that could not be parsed. So none of those texts is ever logged:
// only a fixed class, addresses and sizes.

// slogPrinter is the fasthttp server's Logger. fasthttp's format strings are
// its own constants; of their arguments only addresses and numbers are kept,
// and an error is reduced to its class.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, args ...any) {
	attrs := make([]any, 0, 2+2*len(args))
	attrs = append(attrs, "event", format)
	for _, a := range args {
		switch v := a.(type) {
		case net.Addr:
			attrs = append(attrs, "addr", v.String())
		case int, int64, uint64, float64:
			attrs = append(attrs, "n", v)
		case error:
			attrs = append(attrs, "error", ErrorClass(v))
		}
	}
	p.l.Warn("http server", attrs...)
}

// errorClasses map a fragment of an error's text to the fixed class logged
// in its place, first match wins.
var errorClasses = [...]struct{ fragment, class string }{
	{"body size exceeds", "body_too_large"},
	{"small read buffer", "headers_too_large"},
	{"timeout", "timeout"},
	{"reading request headers", "malformed_request_headers"},
	{"reading response headers", "malformed_response_headers"},
	{"chunk", "malformed_chunked_body"},
	{"content-length", "malformed_content_length"},
	{"unexpected EOF", "unexpected_eof"},
	{"connection reset", "connection_reset"},
	{"broken pipe", "broken_pipe"},
	{"connection refused", "connection_refused"},
	{"closed", "connection_closed"},
	{"no free connections", "no_free_connections"},
	{"tls", "tls"},
}

// ErrorClass returns a fixed, secret-free name for err: never a byte of its
// text.
func ErrorClass(err error) string {
	var small *fasthttp.ErrSmallBuffer
	switch {
	case err == nil:
		return ""
	case errors.Is(err, io.EOF):
		return "eof"
	case errors.As(err, &small):
		return "headers_too_large"
	}
	s := strings.ToLower(err.Error())
	for _, c := range errorClasses {
		if strings.Contains(s, strings.ToLower(c.fragment)) {
			return c.class
		}
	}
	return "other"
}

// redacted stands for an error whose text may quote bytes a peer sent (a
// client's request, an upstream's answer): it
// keeps the chain for errors.Is and errors.As, and says only its class.
type redacted struct{ err error }

func (r redacted) Error() string { return ErrorClass(r.err) }
func (r redacted) Unwrap() error { return r.err }

// panicSummary is what is logged of a handler's panic value: a runtime
// error's fixed text, one of our own "BUG: " messages, else only its type,
// since a value built from the request may carry its bytes.
func panicSummary(v any) string {
	switch p := v.(type) {
	case runtime.Error:
		return p.Error()
	case string:
		if strings.HasPrefix(p, "BUG: ") && !strings.ContainsAny(p, "\"'") {
			return p
		}
	}
	return fmt.Sprintf("%T", v)
}
