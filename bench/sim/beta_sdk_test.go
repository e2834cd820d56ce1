package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func betaClient(s *Server, key string, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(s.URL() + "/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}
	return openai.NewClient(append(base, opts...)...)
}

// betaAPIError asserts that err is an openai API error with status and message.
func betaAPIError(t *testing.T, err error, status int, msg string) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *openai.Error, got %T %v", err, err)
	}
	if apiErr.StatusCode != status || apiErr.Message != msg {
		t.Fatalf("got %d %q, want %d %q", apiErr.StatusCode, apiErr.Message, status, msg)
	}
	return apiErr
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-sim",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
}

func TestBetaChat(t *testing.T) {
	s := startSim(t, Options{Name: "beta-east"})
	c := betaClient(s, testBetaKey)
	var resp *http.Response
	cc, err := c.Chat.Completions.New(context.Background(), chatParams(), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("x-sim-deployment"); got != "beta-east" {
		t.Fatalf("x-sim-deployment %q", got)
	}
	if !strings.HasPrefix(resp.Header.Get("x-request-id"), "req_") {
		t.Fatalf("x-request-id %q", resp.Header.Get("x-request-id"))
	}
	if !strings.HasPrefix(cc.ID, "chatcmpl-") || cc.Object != "chat.completion" || cc.Model != "gpt-sim" {
		t.Fatalf("unexpected completion %+v", cc)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != s.text || cc.Choices[0].FinishReason != "stop" {
		t.Fatalf("unexpected choices %+v", cc.Choices)
	}
	if !strings.Contains(s.text, "beta-east") {
		t.Fatalf("answer text does not name the deployment: %q", s.text)
	}
	if cc.Usage.TotalTokens != cc.Usage.PromptTokens+cc.Usage.CompletionTokens || cc.Usage.CompletionTokens == 0 {
		t.Fatalf("usage %+v", cc.Usage)
	}
}

func TestBetaChatStream(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 7})
	c := betaClient(s, testBetaKey)
	p := chatParams()
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// role chunk + 7 content chunks + finish chunk + usage chunk
	if chunks != 10 {
		t.Fatalf("got %d chunks, want 10", chunks)
	}
	if got := acc.Choices[0].Message.Content; got != s.text {
		t.Fatalf("accumulated %q, want %q", got, s.text)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens == 0 {
		t.Fatalf("finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
}

func TestBetaResponsesLifecycle(t *testing.T) {
	s := startSim(t, Options{})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	r1, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-sim",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("first question")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r1.ID, "resp_") || r1.Status != "completed" || r1.OutputText() != s.text {
		t.Fatalf("unexpected response %s %s %q", r1.ID, r1.Status, r1.OutputText())
	}
	got, err := c.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r1.ID || got.OutputText() != s.text || got.Model != "gpt-sim" {
		t.Fatalf("Get returned %s %q", got.ID, got.OutputText())
	}
	items, err := c.Responses.InputItems.List(ctx, r1.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Data) != 1 || items.Data[0].Role != "user" || itemText(items.Data[0]) != "first question" || items.HasMore {
		t.Fatalf("input items %s", items.RawJSON())
	}

	// A continuation without model inherits it.
	r2, err := c.Responses.New(ctx, responses.ResponseNewParams{
		PreviousResponseID: openai.String(r1.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("second")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Model != "gpt-sim" || r2.PreviousResponseID != r1.ID {
		t.Fatalf("continuation model %q previous %q", r2.Model, r2.PreviousResponseID)
	}

	count, err := c.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{
		PreviousResponseID: openai.String(r2.ID),
		Input:              responses.InputTokenCountParamsInputUnion{OfString: openai.String("third")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if count.Object != "response.input_tokens" || count.InputTokens <= r2.Usage.TotalTokens {
		t.Fatalf("input tokens %+v (previous total %d)", count, r2.Usage.TotalTokens)
	}

	compacted, err := c.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model:              "gpt-sim",
		PreviousResponseID: openai.String(r2.ID),
		Input:              responses.ResponseCompactParamsInputUnion{OfString: openai.String("third")},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := compacted.Output
	if len(out) != 3 || out[0].Type != "message" || out[2].Type != "compaction" || out[2].EncryptedContent == "" {
		t.Fatalf("compaction %s", compacted.RawJSON())
	}

	if err := c.Responses.Delete(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
	betaAPIError(t, err, 404, "Response with id '"+r1.ID+"' not found.")
}

func TestBetaInputItemsPaging(t *testing.T) {
	s := startSim(t, Options{})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("one", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfMessage("two", responses.EasyInputMessageRoleAssistant),
		responses.ResponseInputItemParamOfMessage("three", responses.EasyInputMessageRoleUser),
	}
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := func(p responses.InputItemListParams, wantTexts []string, wantMore bool) string {
		t.Helper()
		page, err := c.Responses.InputItems.List(ctx, r.ID, p)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, it := range page.Data {
			texts = append(texts, itemText(it))
		}
		if strings.Join(texts, ",") != strings.Join(wantTexts, ",") || page.HasMore != wantMore {
			t.Fatalf("page %v more=%v, want %v more=%v", texts, page.HasMore, wantTexts, wantMore)
		}
		return page.Data[len(page.Data)-1].ID
	}
	last := f(responses.InputItemListParams{Limit: openai.Int(2)}, []string{"three", "two"}, true)
	f(responses.InputItemListParams{Limit: openai.Int(2), After: openai.String(last)}, []string{"one"}, false)
	f(responses.InputItemListParams{Order: responses.InputItemListParamsOrderAsc}, []string{"one", "two", "three"}, false)
	reqs := s.Requests()
	if q := reqs[len(reqs)-1].RawQuery; q != "order=asc" {
		t.Fatalf("query %q", q)
	}
}

func TestBetaResponsesStream(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 4})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	var types []string
	var id, text string
	for i := 0; stream.Next(); i++ {
		ev := stream.Current()
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d has sequence_number %d", i, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			if ev.Response.ID != id || ev.Response.OutputText() != s.text {
				t.Fatalf("completed %s %q", ev.Response.ID, ev.Response.OutputText())
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		strings.Repeat("response.output_text.delta ", 4) +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v", types)
	}
	if text != s.text || !strings.HasPrefix(id, "resp_") {
		t.Fatalf("deltas %q id %q", text, id)
	}
	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.Status != "completed" {
		t.Fatalf("Get after stream: %v %v", got, err)
	}
}

func TestBetaPreviousResponseNotFound(t *testing.T) {
	east := startSim(t, Options{Name: "east"})
	west := startSim(t, Options{Name: "west"})
	ctx := context.Background()
	ce, cw := betaClient(east, testBetaKey), betaClient(west, testBetaKey)
	r, err := ce.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The continuation sent to the wrong deployment fails as at the provider.
	_, err = cw.Responses.New(ctx, responses.ResponseNewParams{
		PreviousResponseID: openai.String(r.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("again")},
	})
	apiErr := betaAPIError(t, err, 400, "Previous response with id '"+r.ID+"' not found.")
	if apiErr.Code != "previous_response_not_found" || apiErr.Param != "previous_response_id" || apiErr.Type != "invalid_request_error" {
		t.Fatalf("error %s", apiErr.RawJSON())
	}
	// store=false keeps nothing.
	r, err = ce.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ce.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	betaAPIError(t, err, 404, "Response with id '"+r.ID+"' not found.")
}

func TestBetaErrors(t *testing.T) {
	s := startSim(t, Options{})
	ctx := context.Background()
	bad := betaClient(s, "wrong")
	_, err := bad.Chat.Completions.New(ctx, chatParams())
	apiErr := betaAPIError(t, err, 401, "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
	if apiErr.Code != "invalid_api_key" {
		t.Fatalf("code %q", apiErr.Code)
	}
	c := betaClient(s, testBetaKey)
	leak := option.WithJSONSet("session_id", "s-1")
	_, err = c.Chat.Completions.New(ctx, chatParams(), leak)
	betaAPIError(t, err, 400, "Unrecognized request argument supplied: session_id")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-sim"}, leak)
	betaAPIError(t, err, 400, "Unrecognized request argument supplied: session_id")
	_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "x", Model: "img"}, leak)
	betaAPIError(t, err, 400, "Unrecognized request argument supplied: session_id")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{})
	betaAPIError(t, err, 400, "you must provide a model parameter")
}

func TestBetaModelsAndKnownModels(t *testing.T) {
	s := startSim(t, Options{Models: []string{"gpt-a", "gpt-b"}})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	page, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].ID != "gpt-a" || page.Data[1].OwnedBy != "east" || page.Data[1].Object != "model" {
		t.Fatalf("models %s", page.RawJSON())
	}
	_, err = c.Chat.Completions.New(ctx, chatParams())
	apiErr := betaAPIError(t, err, 404, "The model `gpt-sim` does not exist or you do not have access to it.")
	if apiErr.Code != "model_not_found" {
		t.Fatalf("code %q", apiErr.Code)
	}
}

func TestBetaImages(t *testing.T) {
	s := startSim(t, Options{})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	const padded = 300000
	res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{
		Prompt: "a red fox", Model: "gpt-image-sim", N: openai.Int(2), Size: "1536x1024",
		ResponseFormat: openai.ImageGenerateParamsResponseFormatB64JSON,
	}, option.WithHeader("x-sim-image-bytes", "300000"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || res.Size != "1536x1024" || !strings.Contains(res.Data[0].RevisedPrompt, "a red fox") {
		t.Fatalf("images %d %q", len(res.Data), res.Size)
	}
	raw, err := base64.StdEncoding.DecodeString(res.Data[1].B64JSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != padded {
		t.Fatalf("image is %d bytes, want %d", len(raw), padded)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 64 || b.Dy() != 42 {
		t.Fatalf("image is %v, want 64x42 (1536x1024 scaled)", b)
	}

	res, err = c.Images.Generate(ctx, openai.ImageGenerateParams{
		Prompt: "a blue fox", Model: "gpt-image-sim",
		ResponseFormat: openai.ImageGenerateParamsResponseFormatURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(res.Data[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET %s: %d %s", res.Data[0].URL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if _, err := png.Decode(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
}

// itemText is the text of the first content part of a message input item.
func itemText(it responses.ResponseItemUnion) string {
	m := it.AsMessage()
	if len(m.Content) == 0 {
		return ""
	}
	return m.Content[0].Text
}
