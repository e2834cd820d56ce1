package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// betaInvalidKeyBody is the beta family's 401 for a key that does not authenticate, byte
// for byte: OpenAI's shape, type invalid_request_error and code invalid_api_key, with a
// message that never quotes the key.
const betaInvalidKeyBody = `{"error":{"message":"Incorrect API key provided: invalid API key; check the key this gateway issued you.",` +
	`"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

// A wrong key on every beta endpoint gets betaInvalidKeyBody, and the openai SDK reads its
// code; a missing key keeps code null, and alpha's 401 keeps its own shape.
func TestBetaInvalidKey401(t *testing.T) {
	e := newEnv(t, nil)
	const wrong = "sk-wrong-0123456789-secret"
	for _, call := range []struct{ method, path, body string }{
		{"POST", "/v1/router/beta/v1/chat/completions", chatBody("")},
		{"POST", "/v1/router/beta/v1/responses", `{"model":"chat-model","input":"hi"}`},
		{"GET", "/v1/router/beta/v1/models", ""},
		{"GET", "/v1/router/beta/v1/files", ""},
	} {
		status, h, body := e.do(call.method, call.path, bearer(wrong), call.body)
		if status != 401 || string(body) != betaInvalidKeyBody || !strings.HasPrefix(string(h.ContentType()), "application/json") {
			t.Fatalf("%s %s with a wrong key: %d %s %s", call.method, call.path, status, h.ContentType(), body)
		}
		if strings.Contains(string(body), "0123456789") {
			t.Fatalf("the 401 quotes the key: %s", body)
		}
	}
	_, err := e.openai(wrong).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "chat-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != "invalid_api_key" || oe.Type != "invalid_request_error" ||
		!strings.HasPrefix(oe.Message, "Incorrect API key provided") {
		t.Fatalf("the SDK reads %#v", err)
	}
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", nil, chatBody(""))
	if status != 401 || !strings.HasSuffix(string(body), `"type":"invalid_request_error","param":null,"code":null}}`) {
		t.Fatalf("no key: %d %s", status, body)
	}
	status, _, body = e.do("POST", "/v1/router/alpha/v1/messages", bearer(wrong),
		`{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	assertAlphaError(t, status, body, 401, "authentication_error")
	if strings.Contains(string(body), "invalid_api_key") || strings.Contains(string(body), "Incorrect") {
		t.Fatalf("alpha's 401 in the beta's words: %s", body)
	}
}
