package sim

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"
)

func TestFaultStatus(t *testing.T) {
	s := startSim(t, Options{})
	ctx := context.Background()
	bc := betaClient(s, testBetaKey)
	_, err := bc.Chat.Completions.New(ctx, chatParams(), option.WithHeader("x-sim-fault", "status=503"))
	apiErr := betaAPIError(t, err, 503, "Simulated failure (x-sim-fault).")
	if apiErr.Type != "server_error" {
		t.Fatalf("type %q", apiErr.Type)
	}

	ac := alphaClient(s, testAlphaKey)
	_, err = ac.Messages.New(ctx, messageParams(), aoption.WithHeader("x-sim-fault", "status=529"))
	alphaAPIError(t, err, 529, "overloaded_error", "Simulated failure (x-sim-fault).")

	// A server-wide fault applies until cleared.
	s.SetFault(Fault{Status: 429})
	_, err = gammaClient(t, s, testGammaKey, "v1beta", nil).Models.GenerateContent(ctx, "gemini-sim", genai.Text("hi"), nil)
	gammaAPIError(t, err, 429, "RESOURCE_EXHAUSTED", "Simulated failure (x-sim-fault).")
	_, err = ac.Messages.New(ctx, messageParams())
	alphaAPIError(t, err, 429, "rate_limit_error", "Simulated failure (x-sim-fault).")
	s.SetFault(Fault{})
	if _, err = ac.Messages.New(ctx, messageParams()); err != nil {
		t.Fatal(err)
	}
}

func TestFaultStatusRetriedBySDK(t *testing.T) {
	s := startSim(t, Options{})
	c := openai.NewClient(option.WithBaseURL(s.URL()+"/v1/"), option.WithAPIKey(testBetaKey),
		option.WithMaxRetries(1), option.WithHeader("x-sim-fault", "status=500"))
	_, err := c.Chat.Completions.New(context.Background(), chatParams())
	betaAPIError(t, err, 500, "Simulated failure (x-sim-fault).")
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("the SDK sent %d requests, want 2 (one retry of a 500)", n)
	}
}

func TestFaultReset(t *testing.T) {
	s := startSim(t, Options{})
	ctx := context.Background()
	bc := betaClient(s, testBetaKey)
	_, err := bc.Chat.Completions.New(ctx, chatParams(), option.WithHeader("x-sim-fault", "reset"))
	var apiErr *openai.Error
	if err == nil || errors.As(err, &apiErr) {
		t.Fatalf("want a connection error, got %v", err)
	}
	s.SetFault(Fault{Reset: true})
	ac := alphaClient(s, testAlphaKey)
	_, err = ac.Messages.New(ctx, messageParams())
	var aErr *anthropic.Error
	if err == nil || errors.As(err, &aErr) {
		t.Fatalf("want a connection error, got %v", err)
	}
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("recorded %d requests, want 2", n)
	}
}

func TestFaultCutStream(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 10})
	ctx := context.Background()
	bc := betaClient(s, testBetaKey)
	stream := bc.Chat.Completions.NewStreaming(ctx, chatParams(), option.WithHeader("x-sim-fault", "cut=3"))
	n := 0
	for stream.Next() {
		n++
	}
	if n != 3 || !errors.Is(stream.Err(), io.ErrUnexpectedEOF) {
		t.Fatalf("got %d chunks, err %v; want 3 and unexpected EOF", n, stream.Err())
	}

	ac := alphaClient(s, testAlphaKey)
	astream := ac.Messages.NewStreaming(ctx, messageParams(), aoption.WithHeader("x-sim-fault", "cut=5"))
	n = 0
	for astream.Next() {
		n++
	}
	// message_start, content_block_start, ping (skipped by the SDK), 2 deltas
	if n != 4 || !errors.Is(astream.Err(), io.ErrUnexpectedEOF) {
		t.Fatalf("got %d events, err %v; want 4 and unexpected EOF", n, astream.Err())
	}

	gc := gammaClient(t, s, testGammaKey, "v1beta", nil)
	n = 0
	var gerr error
	for _, err := range gc.Models.GenerateContentStream(ctx, "gemini-sim", genai.Text("hi"),
		&genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: map[string][]string{"X-Sim-Fault": {"cut=2"}}}}) {
		if err != nil {
			gerr = err
			break
		}
		n++
	}
	if n != 2 || !errors.Is(gerr, io.ErrUnexpectedEOF) {
		t.Fatalf("got %d chunks, err %v; want 2 and unexpected EOF", n, gerr)
	}
}

func TestFaultCutPlain(t *testing.T) {
	s := startSim(t, Options{})
	bc := betaClient(s, testBetaKey)
	_, err := bc.Chat.Completions.New(context.Background(), chatParams(), option.WithHeader("x-sim-fault", "cut=10"))
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("want an unexpected EOF, got %v", err)
	}
}

func TestFaultErrorEvent(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 10})
	ctx := context.Background()
	bc := betaClient(s, testBetaKey)
	stream := bc.Chat.Completions.NewStreaming(ctx, chatParams(), option.WithHeader("x-sim-fault", "error=3"))
	n := 0
	for stream.Next() {
		n++
	}
	var se *ssestream.StreamError
	if n != 3 || !errors.As(stream.Err(), &se) || !strings.Contains(se.Message, "server_error") {
		t.Fatalf("got %d chunks, err %v", n, stream.Err())
	}

	ac := alphaClient(s, testAlphaKey)
	astream := ac.Messages.NewStreaming(ctx, messageParams(), aoption.WithHeader("x-sim-fault", "error=4"))
	for astream.Next() {
	}
	var aErr *anthropic.Error
	if !errors.As(astream.Err(), &aErr) || aErr.Type() != "overloaded_error" {
		t.Fatalf("want an overloaded_error, got %v", astream.Err())
	}

	gc := gammaClient(t, s, testGammaKey, "v1beta", nil)
	var gerr error
	for _, err := range gc.Models.GenerateContentStream(ctx, "gemini-sim", genai.Text("hi"),
		&genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Headers: map[string][]string{"X-Sim-Fault": {"error=1"}}}}) {
		if err != nil {
			gerr = err
			break
		}
	}
	gammaAPIError(t, gerr, 503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
}

func TestFaultErrorEventResponses(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 10})
	ctx := context.Background()
	bc := betaClient(s, testBetaKey)
	stream := bc.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	}, option.WithHeader("x-sim-fault", "error=5"))
	var types []string
	var id string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) != 7 || types[5] != "error" || types[6] != "response.failed" {
		t.Fatalf("events %v", types)
	}
	r, err := bc.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || r.Status != "failed" {
		t.Fatalf("stored response %v %v", r, err)
	}
}

func TestFaultFirstByteDelay(t *testing.T) {
	s := startSim(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	bc := betaClient(s, testBetaKey)
	_, err := bc.Chat.Completions.New(ctx, chatParams(), option.WithHeader("x-sim-fault", "first-byte=10m"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
	// Close ends the pending delay; the test would hang otherwise.
	s.Close()
}

func TestFaultBadHeader(t *testing.T) {
	s := startSim(t, Options{})
	bc := betaClient(s, testBetaKey)
	_, err := bc.Chat.Completions.New(context.Background(), chatParams(), option.WithHeader("x-sim-fault", "explode"))
	betaAPIError(t, err, 400, `x-sim-fault: unknown fault "explode"`)
}
