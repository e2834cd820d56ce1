package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func post(t *testing.T, url string, header http.Header, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestRecordExactRequest(t *testing.T) {
	s := startSim(t, Options{})
	// Odd spacing, key order and escapes must come back byte for byte.
	body := []byte("{ \"model\" : \"gpt-sim\",\n\"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9 \u2603\"}] }")
	h := http.Header{"Authorization": {"Bearer " + testBetaKey}, "x-custom-thing": {"a", "b"}}
	resp := post(t, s.URL()+"/v1/chat/completions?x=1&y=%20", h, body)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if !bytes.Equal(r.Body, body) {
		t.Fatalf("recorded body %q, want %q", r.Body, body)
	}
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.RawQuery != "x=1&y=%20" {
		t.Fatalf("recorded %s %s ? %s", r.Method, r.Path, r.RawQuery)
	}
	if got := r.Header["X-Custom-Thing"]; len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("recorded header %v", r.Header)
	}
	if r.Header.Get("Authorization") != "Bearer "+testBetaKey {
		t.Fatalf("recorded header %v", r.Header)
	}
	// The copy is the caller's own.
	reqs[0].Body[0] = 'X'
	if s.Requests()[0].Body[0] != '{' {
		t.Fatal("Requests returned shared memory")
	}
}

func TestRecordResetKeepsStore(t *testing.T) {
	s := startSim(t, Options{RecordLimit: 2})
	c := betaClient(s, testBetaKey)
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-sim", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Chat.Completions.New(ctx, chatParams()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Models.List(ctx); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Path != "/v1/chat/completions" || reqs[1].Path != "/v1/models" {
		t.Fatalf("the limit keeps the newest, oldest first: %d requests %v", len(reqs), reqs)
	}
	s.Reset()
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests after Reset", n)
	}
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("Reset dropped the stored response: %v", err)
	}
}

func TestNoRecord(t *testing.T) {
	s := startSim(t, Options{NoRecord: true})
	c := betaClient(s, testBetaKey)
	if _, err := c.Chat.Completions.New(context.Background(), chatParams()); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("recorded %d requests with NoRecord", n)
	}
}

func TestCloseRefusesAndCutsStreams(t *testing.T) {
	s := startSim(t, Options{StreamEvents: 2, EventDelay: time.Hour})
	c := betaClient(s, testBetaKey)
	stream := c.Chat.Completions.NewStreaming(context.Background(), chatParams())
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Fatal("an open stream survived Close")
	}
	_, err := net.Dial("tcp", s.Addr())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestUnknownPaths(t *testing.T) {
	s := startSim(t, Options{})
	f := func(path string, h http.Header, want string) {
		t.Helper()
		resp := post(t, s.URL()+path, h, []byte("{}"))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 404 || !strings.Contains(string(b), want) || resp.Header.Get("x-sim-deployment") != "east" {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	f("/v1/nothing", http.Header{"Authorization": {"Bearer " + testBetaKey}},
		`{"error":{"message":"Invalid URL (POST /v1/nothing)","type":"invalid_request_error","param":null,"code":null}}`)
	f("/v1/messages/nothing", http.Header{"X-Api-Key": {testAlphaKey}},
		`{"type":"error","error":{"type":"not_found_error","message":"Not found"},"request_id":"req_`)
	f("/v1beta/models/g:countTokens", http.Header{"X-Goog-Api-Key": {testGammaKey}},
		`{"error":{"code":404,"message":"Method not found.","status":"NOT_FOUND"}}`)
}
