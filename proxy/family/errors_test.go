package family

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/gateway/parse"
)

// The error tables say what the providers document for each status: the
// Anthropic error types, the OpenAI error types, and the google.rpc names of
// the canonical HTTP mapping. The gateway and the simulator both answer from
// them.
func TestErrorTablesHoldDocumentedValues(t *testing.T) {
	alpha := map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 409: "conflict_error", 413: "request_too_large", 429: "rate_limit_error",
		500: "api_error", 502: "api_error", 504: "timeout_error", 529: "overloaded_error", 418: "invalid_request_error",
	}
	beta := map[int]string{
		400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
		429: "requests", 500: "server_error", 503: "server_error",
	}
	gamma := map[int]string{
		400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		409: "ALREADY_EXISTS", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
		501: "UNIMPLEMENTED", 502: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 412: "FAILED_PRECONDITION",
	}
	f := func(name string, table func(int) string, want map[int]string) {
		t.Helper()
		for status, w := range want {
			if got := table(status); got != w {
				t.Errorf("%s(%d) = %q, want %q", name, status, got, w)
			}
		}
	}
	f("AlphaErrorType", AlphaErrorType, alpha)
	f("BetaErrorType", BetaErrorType, beta)
	f("GammaStatus", GammaStatus, gamma)
}

// Every family's error body is JSON in the provider's shape, whatever the
// message holds.
func TestAppendErrorBody(t *testing.T) {
	msg := "bad \"input\" <x> & \\ \n\t\u2028 \xff end"
	e := ErrorBody{Status: 404, Message: msg, Param: "model", Code: "model_not_found"}
	f := func(fam Family, want string) {
		t.Helper()
		b := AppendErrorBody(nil, fam, e, []byte("req_1"))
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v in %s", fam, err, b)
		}
		if got, _ := json.Marshal(v); string(got) != want {
			t.Fatalf("%s:\n got %s\nwant %s", fam, got, want)
		}
	}
	m, _ := json.Marshal(strings.ToValidUTF8(msg, "\uFFFD"))
	f(Alpha, `{"error":{"message":`+string(m)+`,"type":"not_found_error"},"request_id":"req_1","type":"error"}`)
	f(Beta, `{"error":{"code":"model_not_found","message":`+string(m)+`,"param":"model","type":"invalid_request_error"}}`)
	f(Gamma, `{"error":{"code":404,"message":`+string(m)+`,"status":"NOT_FOUND"}}`)
}

// The frame that ends a broken stream is one SSE event of JSON data.
func TestAppendStreamError(t *testing.T) {
	f := func(fam Family, responses bool, wantName string) {
		t.Helper()
		var s parse.Scanner
		s.Feed(AppendStreamError(nil, fam, responses, "cut \"short\""))
		ev, ok, err := s.Next()
		if err != nil || !ok {
			t.Fatalf("%s: no event (%v)", fam, err)
		}
		if string(ev.Name) != wantName || !json.Valid(ev.Data) || !strings.Contains(string(ev.Data), `cut \"short\"`) {
			t.Fatalf("%s responses=%v: event %q data %s", fam, responses, ev.Name, ev.Data)
		}
	}
	f(Alpha, false, "error")
	f(Beta, true, "error")
	f(Beta, false, "")
	f(Gamma, false, "")
}
