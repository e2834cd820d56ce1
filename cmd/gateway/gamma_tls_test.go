package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/genai"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// answerLog is a simulator behind a listener of the test's own that keeps the bytes of
// every answer it produced.
type answerLog struct {
	mu      sync.Mutex
	answers [][]byte
}

func (l *answerLog) last(t *testing.T) []byte {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.answers) == 0 {
		t.Fatal("the simulator produced no answer")
	}
	return l.answers[len(l.answers)-1]
}

func (l *answerLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// startRecordedSim serves s on a loopback port and records each answer body it produces.
func startRecordedSim(t *testing.T, s *sim.Server) (string, *answerLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &answerLog{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		s.Handler(ctx)
		if ctx.Response.IsBodyStream() {
			return // not what this test asks for: the count shows it
		}
		l.mu.Lock()
		l.answers = append(l.answers, append([]byte(nil), ctx.Response.Body()...))
		l.mu.Unlock()
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String(), l
}

// bodyTap is a transport that keeps the last answer body its client read.
type bodyTap struct {
	next http.RoundTripper
	mu   sync.Mutex
	last []byte
}

func (b *bodyTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.last = body
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// TestGammaSDKOverTLS: the official Go genai SDK, trusting the test CA through its HTTP
// client, calls generateContent through the TLS listener (listen: off): the answer it
// reads is byte for byte the one the simulator produced, and what it decodes (text,
// image, usage) is what that answer holds. A streamed call gets the gateway's documented
// refusal as a genai.APIError (400 INVALID_ARGUMENT) over the same TLS connection, and
// nothing reaches the simulator.
func TestGammaSDKOverTLS(t *testing.T) {
	s := sim.New(sim.Options{Name: "g1", GammaKey: "up-gamma-tls"})
	addr, answers := startRecordedSim(t, s)
	dir := t.TempDir()
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 90*24*time.Hour)
	y := fmt.Sprintf(`listen: off
listen_tls: 127.0.0.1:0
tls: {cert_file: %q, key_file: %q}
store: {path: %q}
keys:
  - {id: team-a, key: %s}
upstreams:
  - {name: g1-gamma, family: gamma, base_url: "http://%s", api_key: up-gamma-tls}
models:
  - {id: tls-image, image: true, upstreams: [g1-gamma]}
`, leaf.CertFile, leaf.KeyFile, filepath.Join(dir, "data"), keyA, addr)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	g := launch(t, dir, []string{"-config", cfgPath, "-admin-listen", "off", "-log-format", "json"}, nil)
	base := tlsBase(t, g)

	tap := &bodyTap{next: tlsClient(ca.Pool(), true).Transport}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:     "unused-by-the-gateway",
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: &http.Client{Transport: tap},
		HTTPOptions: genai.HTTPOptions{BaseURL: base + "/v1/router/gamma", APIVersion: "v1beta",
			Headers: http.Header{"X-Gamma-Api-Key": {keyA}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &genai.GenerateContentConfig{ResponseModalities: []string{"TEXT", "IMAGE"},
		ImageConfig: &genai.ImageConfig{AspectRatio: "16:9", ImageSize: "1K"}}
	res, err := c.Models.GenerateContent(ctx, "tls-image", genai.Text("a lighthouse"), cfg)
	if err != nil {
		t.Fatalf("generateContent over TLS: %v", err)
	}
	produced := answers.last(t)
	tap.mu.Lock()
	read := tap.last
	tap.mu.Unlock()
	if !bytes.Equal(read, produced) {
		t.Fatalf("the SDK read %d bytes, not the %d the simulator produced:\n%.300s\n%.300s", len(read), len(produced), read, produced)
	}
	var want genai.GenerateContentResponse
	if err := json.Unmarshal(produced, &want); err != nil {
		t.Fatal(err)
	}
	if res.ResponseID == "" || res.ResponseID != want.ResponseID || textOf(res) == "" || textOf(res) != textOf(&want) ||
		res.UsageMetadata == nil || res.UsageMetadata.TotalTokenCount != want.UsageMetadata.TotalTokenCount {
		t.Fatalf("the SDK decoded id %q text %q usage %+v; the simulator answered id %q text %q", res.ResponseID, textOf(res),
			res.UsageMetadata, want.ResponseID, textOf(&want))
	}
	gotImg, wantImg := inlineImage(res), inlineImage(&want)
	if len(gotImg) == 0 || !bytes.Equal(gotImg, wantImg) {
		t.Fatalf("image: %d bytes decoded, %d produced", len(gotImg), len(wantImg))
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1beta/models/tls-image:generateContent" ||
		reqs[0].Header.Get("X-Goog-Api-Key") != "up-gamma-tls" {
		t.Fatalf("the simulator received %d requests: %+v", len(reqs), reqs)
	}

	before := answers.count()
	var streamErr error
	for _, err := range c.Models.GenerateContentStream(ctx, "tls-image", genai.Text("a lighthouse"), cfg) {
		if err != nil {
			streamErr = err
			break
		}
	}
	var ae genai.APIError
	if !errors.As(streamErr, &ae) || ae.Code != 400 || ae.Status != "INVALID_ARGUMENT" {
		t.Fatalf("streamGenerateContent over TLS: %#v, want the 400 INVALID_ARGUMENT refusal", streamErr)
	}
	if answers.count() != before || len(s.Requests()) != 1 {
		t.Fatal("a refused stream reached the simulator")
	}
	if res, err := c.Models.GenerateContent(ctx, "tls-image", genai.Text("again"), nil); err != nil || textOf(res) == "" {
		t.Fatalf("generateContent after the refused stream: %v", err)
	}
}

// inlineImage returns the bytes of the first inline image of r's first candidate.
func inlineImage(r *genai.GenerateContentResponse) []byte {
	if len(r.Candidates) == 0 || r.Candidates[0].Content == nil {
		return nil
	}
	for _, p := range r.Candidates[0].Content.Parts {
		if p.InlineData != nil {
			return p.InlineData.Data
		}
	}
	return nil
}

// textOf returns the text parts of r's first candidate, joined.
func textOf(r *genai.GenerateContentResponse) string {
	if len(r.Candidates) == 0 || r.Candidates[0].Content == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range r.Candidates[0].Content.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
