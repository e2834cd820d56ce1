package sim

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The simulator reads bodies with fastjson, whose Object.Get returns the first member of a
// repeated key: it answers as a provider that takes the first occurrence. The gateway's tests
// of repeated fields rely on this.
func TestFirstMemberWins(t *testing.T) {
	s := startSim(t, Options{})
	post := func(path, body string) string {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://" + s.Addr() + path)
		req.Header.Set("Authorization", "Bearer "+testBetaKey)
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
		if err := fasthttp.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("POST %s: %v %d %s", path, err, resp.StatusCode(), resp.Body())
		}
		return string(resp.Body())
	}
	got := post("/v1/chat/completions", `{"model":"first-model","model":"last-model","messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, `"model":"first-model"`) {
		t.Fatalf("chat answered as another model: %s", got)
	}
	id := func(answer string) string {
		i := strings.Index(answer, `"id":"`) + len(`"id":"`)
		return answer[i : i+strings.IndexByte(answer[i:], '"')]
	}
	first := id(post("/v1/responses", `{"model":"m","input":"FIRST-INPUT"}`))
	last := id(post("/v1/responses", `{"model":"m","input":"LAST-INPUT"}`))
	got = post("/v1/responses/compact", `{"model":"m","previous_response_id":"`+first+`","previous_response_id":"`+last+`"}`)
	if !strings.Contains(got, "FIRST-INPUT") || strings.Contains(got, "LAST-INPUT") {
		t.Fatalf("compact did not continue the first previous_response_id: %s", got)
	}
}
