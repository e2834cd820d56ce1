package sim

import (
	"bytes"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden SSE transcripts under testdata/")

// deterministicSim serves a simulator with a fixed id seed and clock; it returns its URL.
func deterministicSim(t *testing.T) string {
	t.Helper()
	s := newServer(Options{Name: "golden", ChatBytes: 60, StreamEvents: 3}, 42, fixedClock)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return "http://" + ln.Addr().String()
}

func TestGoldenStreams(t *testing.T) {
	f := func(name, path string, h http.Header, body string) {
		t.Helper()
		resp := post(t, deterministicSim(t)+path, h, []byte(body))
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
			resp.Header.Get("x-sim-deployment") != "golden" || resp.ContentLength != -1 {
			t.Fatalf("%s: %d %v", name, resp.StatusCode, resp.Header)
		}
		file := filepath.Join("testdata", name+".sse")
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs from %s:\n%s", name, file, got)
		}
	}
	f("alpha_messages", "/v1/messages",
		http.Header{"X-Api-Key": {"k"}, "Anthropic-Version": {"2023-06-01"}},
		`{"model":"claude-sim","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	f("beta_chat", "/v1/chat/completions",
		http.Header{"Authorization": {"Bearer k"}},
		`{"model":"gpt-sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	f("beta_responses", "/v1/responses",
		http.Header{"Authorization": {"Bearer k"}},
		`{"model":"gpt-sim","stream":true,"input":"hi","instructions":"be brief"}`)
	f("gamma_generate", "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
		http.Header{"X-Goog-Api-Key": {"k"}},
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
}
