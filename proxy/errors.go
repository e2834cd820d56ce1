package proxy

import (
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
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
	// RetryAfter, when positive, is sent as Retry-After, in seconds (and
	// in a gamma 429's RetryInfo).
	RetryAfter int
	// Type replaces the beta body's type of a 429 (requests or tokens).
	Type string
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

// storeError is the client's error for a store call that failed with err, msg saying what
// could not be done. A store that cannot serve now (store.ErrUnavailable: a shared engine
// unreachable or failing over) is a 503 that the SDKs retry, after Retry-After; any other
// failure is a 500.
func storeError(msg string, err error) *Error {
	if errors.Is(err, store.ErrUnavailable) {
		return &Error{Status: 503, Reason: "store_unavailable", Message: msg + ": the store is unavailable, retry shortly",
			Cause: err, RetryAfter: 1}
	}
	return &Error{Status: 500, Reason: "store_error", Message: msg, Cause: err}
}

// writeError answers e in the family's native shape. Rejections are final, so
// the SDKs are told not to retry them.
func writeError(ctx *fasthttp.RequestCtx, fam family.Family, e *Error, requestID []byte) {
	resp := &ctx.Response
	resp.ResetBody()
	resp.SetStatusCode(e.Status)
	resp.Header.SetContentType("application/json")
	if e.RetryAfter > 0 {
		resp.Header.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Status < 500 && e.Status != 408 && e.Status != 409 && e.Status != 429 {
		resp.Header.Set("x-should-retry", "false")
	}
	body := family.ErrorBody{Status: e.Status, Message: e.Message, Param: e.Param, Code: e.Code,
		Type: e.Type, RetryDelay: e.RetryAfter}
	resp.SetBodyRaw(family.AppendErrorBody(resp.Body()[:0], fam, body, requestID))
}

const hexDigits = "0123456789abcdef"
