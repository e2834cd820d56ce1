package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

func alphaClient(s *Server, key string, opts ...option.RequestOption) anthropic.Client {
	base := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(s.URL()),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}
	return anthropic.NewClient(append(base, opts...)...)
}

// alphaAPIError asserts that err is an anthropic API error of status, type and message.
func alphaAPIError(t *testing.T, err error, status int, typ, msg string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *anthropic.Error, got %T %v", err, err)
	}
	raw := apiErr.RawJSON()
	if apiErr.StatusCode != status || string(apiErr.Type()) != typ || !strings.Contains(raw, `"message":"`+msg+`"`) {
		t.Fatalf("got %d %s %s, want %d %s %q", apiErr.StatusCode, apiErr.Type(), raw, status, typ, msg)
	}
	if apiErr.RequestID == "" || !strings.Contains(raw, `"request_id":"`+apiErr.RequestID+`"`) {
		t.Fatalf("request id %q not in %s", apiErr.RequestID, raw)
	}
}

func messageParams(blocks ...anthropic.ContentBlockParamUnion) anthropic.MessageNewParams {
	if len(blocks) == 0 {
		blocks = []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("hello")}
	}
	return anthropic.MessageNewParams{
		Model:     "claude-sim",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)},
	}
}

func TestAlphaMessage(t *testing.T) {
	s := startSim(t, Options{Name: "alpha-east"})
	c := alphaClient(s, testAlphaKey)
	var resp *http.Response
	m, err := c.Messages.New(context.Background(), messageParams(), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("x-sim-deployment") != "alpha-east" || !strings.HasPrefix(resp.Header.Get("request-id"), "req_") {
		t.Fatalf("headers %v", resp.Header)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Model != "claude-sim" || m.Role != "assistant" || m.StopReason != "end_turn" {
		t.Fatalf("message %s", m.RawJSON())
	}
	if len(m.Content) != 1 || m.Content[0].Text != s.text || m.Usage.OutputTokens == 0 || m.Usage.InputTokens == 0 {
		t.Fatalf("message %s", m.RawJSON())
	}
	req := s.Requests()[0]
	if req.Header.Get("Anthropic-Version") != "2023-06-01" || req.Header.Get("X-Api-Key") != testAlphaKey {
		t.Fatalf("request headers %v", req.Header)
	}
}

func TestAlphaStream(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 6})
	c := alphaClient(s, testAlphaKey)
	stream := c.Messages.NewStreaming(context.Background(), messageParams())
	var m anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := m.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "message_start content_block_start " + strings.Repeat("content_block_delta ", 6) +
		"content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v", types)
	}
	if len(m.Content) != 1 || m.Content[0].Text != s.text || m.StopReason != "end_turn" || m.Usage.OutputTokens == 0 {
		t.Fatalf("accumulated %s", m.RawJSON())
	}
	if !strings.HasPrefix(m.ID, "msg_") {
		t.Fatalf("id %q", m.ID)
	}
}

func TestAlphaErrors(t *testing.T) {
	s := startSim(t, Options{Models: []string{"claude-sim"}})
	ctx := context.Background()
	bad := alphaClient(s, "wrong")
	_, err := bad.Messages.New(ctx, messageParams())
	alphaAPIError(t, err, 401, "authentication_error", "invalid x-api-key")

	c := alphaClient(s, testAlphaKey)
	_, err = c.Messages.New(ctx, messageParams(), option.WithJSONSet("session_id", "s-1"))
	alphaAPIError(t, err, 400, "invalid_request_error", "session_id: Extra inputs are not permitted")

	p := messageParams()
	p.SetExtraFields(map[string]any{"session_id": "s-2"})
	_, err = c.Messages.New(ctx, p)
	alphaAPIError(t, err, 400, "invalid_request_error", "session_id: Extra inputs are not permitted")

	_, err = c.Messages.New(ctx, messageParams(), option.WithHeaderDel("anthropic-version"))
	alphaAPIError(t, err, 400, "invalid_request_error", "anthropic-version: header is required")

	_, err = c.Messages.New(ctx, messageParams(), option.WithJSONDel("max_tokens"))
	alphaAPIError(t, err, 400, "invalid_request_error", "max_tokens: Field required")

	p = messageParams()
	p.Model = "claude-other"
	_, err = c.Messages.New(ctx, p)
	alphaAPIError(t, err, 404, "not_found_error", "model: claude-other")
}

func TestAlphaImageBlocks(t *testing.T) {
	s := startSim(t, Options{})
	c := alphaClient(s, testAlphaKey)
	ctx := context.Background()
	pngB64 := base64.StdEncoding.EncodeToString(makePNG(4, 4, "x"))
	f := func(block anthropic.ContentBlockParamUnion, status int, typ, msg string) {
		t.Helper()
		_, err := c.Messages.New(ctx, messageParams(anthropic.NewTextBlock("look"), block))
		if status == 200 {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		alphaAPIError(t, err, status, typ, msg)
	}
	const at = "messages.0.content.1.image.source"
	f(anthropic.NewImageBlockBase64("image/png", pngB64), 200, "", "")
	f(anthropic.NewImageBlockBase64("image/jpeg", pngB64), 400, "invalid_request_error",
		at+".base64.data: The image was specified using the image/jpeg media type, but the image appears to be a image/png image")
	f(anthropic.NewImageBlockBase64("image/png", "%%%not base64"), 400, "invalid_request_error",
		at+".base64.data: The image data is not valid base64.")
	f(anthropic.NewImageBlockBase64("image/bmp", pngB64), 400, "invalid_request_error",
		at+".base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
	fileBlock := anthropic.NewImageBlock(anthropic.FileImageSourceParam{FileID: "file_011abc"})
	f(fileBlock, 404, "not_found_error", at+".file_id: File not found: file_011abc")

	// The simulator sees the exact base64 bytes the client sent.
	reqs := s.Requests()
	if !bytes.Contains(reqs[0].Body, []byte(pngB64)) {
		t.Fatalf("recorded body lacks the image data")
	}
}
