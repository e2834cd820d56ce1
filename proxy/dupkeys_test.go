package proxy

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The simulators read bodies with fastjson, whose Object.Get returns the first member of a
// repeated key: they stand for a provider that takes the first occurrence, where the gateway's
// parser used to take the last.

// twoTenants creates a response for keyB holding secret input and one for keyA, on the same
// deployment (same session key), and returns their ids and that deployment.
func twoTenants(t *testing.T, e *testEnv) (mine, theirs, holder string) {
	t.Helper()
	create := func(key, input string) (string, string) {
		status, h, body := e.do("POST", responsesBase, withSession(key, "shared-conv"),
			`{"model":"chat-model","input":"`+input+`"}`)
		var r struct{ ID string }
		if status != 200 || json.Unmarshal(body, &r) != nil || r.ID == "" {
			t.Fatalf("create for %s: %d %s", key, status, body)
		}
		return r.ID, string(h.Peek("x-sim-deployment"))
	}
	theirs, dB := create(keyB, "B-SECRET-INPUT")
	mine, dA := create(keyA, "mine")
	if dA != dB {
		t.Fatalf("the two responses live on %s and %s; the test needs one deployment", dA, dB)
	}
	e.resetSims()
	return mine, theirs, dA
}

// simDo sends body straight to a simulator, as the gateway would forward it.
func simDo(t *testing.T, e *testEnv, holder, path, body string) (int, []byte) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + e.sim(holder).Addr() + "/v1" + path)
	req.Header.Set("Authorization", "Bearer up-beta")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	if err := fasthttp.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// A body naming another tenant's response first and the caller's own last is refused by every
// owner-scoped call, in every spelling a decoder could take for the key; the simulator, which
// takes the first member, would have continued the other tenant's response.
func TestDuplicatePreviousResponseIDCrossTenant(t *testing.T) {
	e := newEnv(t, nil)
	mine, theirs, holder := twoTenants(t, e)
	spellings := []string{`"previous_response_id"`, `"previous\u005fresponse\u005fid"`, `"Previous_Response_Id"`, `"previouſ_response_id"`, `"previousResponseId"`}
	// What the provider does with such a body: compact hands back the other tenant's input.
	status, got := simDo(t, e, holder, "/responses/compact",
		`{"model":"chat-model","previous_response_id":"`+theirs+`","previous_response_id":"`+mine+`","input":"x"}`)
	if status != 200 || !strings.Contains(string(got), "B-SECRET-INPUT") {
		t.Fatalf("the simulator no longer takes the first member: %d %s", status, got)
	}
	e.resetSims()
	for _, path := range []string{"", "/compact", "/input_tokens"} {
		for _, first := range spellings {
			body := `{"model":"chat-model",` + first + `:"` + theirs + `","input":"x","previous_response_id":"` + mine + `"}`
			status, _, got := e.do("POST", responsesBase+path, bearer(keyA), body)
			assertBetaError(t, status, got, 400)
			if !strings.Contains(string(got), `"param":"previous_response_id"`) || strings.Contains(string(got), "SECRET") {
				t.Fatalf("POST %s %s: %s", path, body, got)
			}
		}
	}
	if n := len(e.received()); n != 0 {
		t.Fatalf("refused calls reached a provider: %d", n)
	}
}

// A repeated or case-variant model is refused in each family's error shape before routing:
// the gateway would route one model while the provider reads another.
func TestDuplicateModelEveryFamily(t *testing.T) {
	e := newEnv(t, withExtraModels)
	msgs := `"messages":[{"role":"user","content":"x"}]`
	bodies := []string{
		`{"model":"unlisted-model-x","model":"chat-model",` + msgs + `}`,
		`{"MODEL":"unlisted-model-x","model":"chat-model",` + msgs + `}`,
		`{"mod\u0065l":"unlisted-model-x","model":"chat-model",` + msgs + `}`,
		`{"Model":"chat-model",` + msgs + `}`,
		`{"model":"chat-model","stream":false,"ſtream":true,` + msgs + `}`,
		`{"model":"chat-model","session_id":"a","SESSION_ID":"b",` + msgs + `}`,
	}
	for _, body := range bodies {
		s, h, b := e.do("POST", "/v1/router/alpha/v1/messages", bearer(keyA), strings.Replace(body, `"messages"`, `"max_tokens":5,"messages"`, 1))
		assertAlphaError(t, s, b, 400, "invalid_request_error")
		if !strings.Contains(string(b), "more than once") && !strings.Contains(string(b), "spelled exactly") || len(h.Peek("request-id")) == 0 {
			t.Fatalf("alpha %s: %s", body, b)
		}
		s, _, b = e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), body)
		assertBetaError(t, s, b, 400)
		s, _, b = e.do("POST", responsesBase, bearer(keyA), body)
		assertBetaError(t, s, b, 400)
	}
	for _, body := range []string{
		`{"model":"chat-model","model":"image-model","prompt":"a cat"}`,
		`{"model":"image-model","prompt":"a cat","PROMPT":"another"}`,
		`{"model":"image-model","prompt":"a cat","Prompt":"x"}`,
	} {
		s, _, b := e.do("POST", imagesPath, bearer(keyA), body)
		assertImagesError(t, s, b, 400, "")
	}
	s, _, b := e.do("POST", responsesBase, bearer(keyA), `{"model":"chat-model","input":"x","store":false,"Store":true}`)
	assertBetaError(t, s, b, 400)
	gk := map[string]string{"x-gamma-api-key": keyA}
	s, _, b = e.do("POST", "/v1/router/gamma/v1beta/models/image-model:generateContent", gk,
		`{"contents":[{"role":"user","parts":[{"text":"a cat"}]}],"session_id":"a","session\u005fid":"b"}`)
	assertGammaError(t, s, b, 400, "INVALID_ARGUMENT", "session_id appears more than once")
	if n := len(e.received()); n != 0 {
		t.Fatalf("refused calls reached a provider: %d", n)
	}
}

// A credential header sent twice is refused with 400 in the family's shape,
// before any key lookup or upstream call: a proxy in front may read another
// of the copies than the gateway, which would take the first. So are an alpha
// call's two different keys in Authorization and x-api-key; the same key in
// both is served.
func TestCredentialSentTwiceRefused(t *testing.T) {
	e := newEnv(t, nil)
	addr := strings.TrimPrefix(e.base, "http://")
	call := func(path, headers, body string) (int, []byte) {
		t.Helper()
		answers, bodies := exchange(t, addr, "POST "+path+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n"+
			"Content-Type: application/json\r\n"+headers+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		if len(answers) != 1 {
			t.Fatalf("%s %q: %d answers", path, headers, len(answers))
		}
		return answers[0].StatusCode, []byte(bodies[0])
	}
	const (
		chat     = "/v1/router/beta/v1/chat/completions"
		messages = "/v1/router/alpha/v1/messages"
		image    = "/v1/router/gamma/v1beta/models/image-model:generateContent"
	)
	chatBody := `{"model":"chat-model","messages":[{"role":"user","content":"x"}]}`
	msgBody := `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	imageBody := `{"contents":[{"role":"user","parts":[{"text":"a cat"}]}]}`
	bearerA, bearerB := "Authorization: Bearer "+keyA+"\r\n", "Authorization: Bearer "+keyB+"\r\n"

	s, b := call(chat, bearerA+bearerB, chatBody)
	assertBetaError(t, s, b, 400)
	s, b = call(chat, bearerA+bearerA, chatBody) // even the same key twice
	assertBetaError(t, s, b, 400)
	s, b = call(messages, "x-api-key: "+keyA+"\r\nx-api-key: "+keyB+"\r\n", msgBody)
	assertAlphaError(t, s, b, 400, "invalid_request_error")
	s, b = call(messages, bearerA+"x-api-key: "+keyB+"\r\n", msgBody)
	assertAlphaError(t, s, b, 400, "invalid_request_error")
	s, b = call(image, "x-gamma-api-key: "+keyA+"\r\nx-gamma-api-key: "+keyB+"\r\n", imageBody)
	assertGammaError(t, s, b, 400, "INVALID_ARGUMENT", "more than one x-gamma-api-key")
	if n := len(e.received()); n != 0 {
		t.Fatalf("refused calls reached a provider: %d", n)
	}
	if s, b := call(messages, bearerA+"x-api-key: "+keyA+"\r\n", msgBody); s != 200 {
		t.Fatalf("the same key in both: %d %s", s, b)
	}
}
