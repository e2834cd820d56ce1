package sim

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProviderHeaders shows that every answer, a failure included, carries
// its provider's headers besides the request id: OpenAI's rate limits and
// version, Anthropic's rate limits with their resets as RFC 3339 times,
// Gemini's front-end headers; and that OpenAI's and Anthropic's Cloudflare
// ray id ends their request id.
func TestProviderHeaders(t *testing.T) {
	s := startSim(t, Options{})
	cases := []struct {
		name, path, body, id string
		header               http.Header
		want                 []string
	}{
		{"beta", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", http.Header{"Authorization": {"Bearer " + testBetaKey}},
			[]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", "Openai-Version", "Openai-Processing-Ms"}},
		{"alpha", "/v1/messages", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "Request-Id", http.Header{"X-Api-Key": {testAlphaKey}, "Anthropic-Version": {"2023-06-01"}},
			[]string{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Organization-Id"}},
		{"gamma", "/v1beta/models/g:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "", http.Header{"X-Goog-Api-Key": {testGammaKey}},
			[]string{"Vary", "Server-Timing", "X-Frame-Options"}},
	}
	for _, tc := range cases {
		for _, fault := range []string{"", "status=429"} {
			req, err := http.NewRequest("POST", s.URL()+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tc.header.Clone()
			req.Header.Set("Content-Type", "application/json")
			if fault != "" {
				req.Header.Set("X-Sim-Fault", fault)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[string]int{"": 200, "status=429": 429}[fault]; resp.StatusCode != want {
				t.Fatalf("%s %q: status %d, want %d", tc.name, fault, resp.StatusCode, want)
			}
			for _, h := range tc.want {
				if resp.Header.Get(h) == "" {
					t.Errorf("%s %q: no %s in %v", tc.name, fault, h, resp.Header)
				}
			}
			if tc.name == "alpha" {
				reset, err := time.Parse(time.RFC3339, resp.Header.Get("Anthropic-Ratelimit-Requests-Reset"))
				if err != nil || reset.Before(time.Now().Add(-time.Second)) {
					t.Errorf("alpha %q: requests reset %v (%v), not a coming RFC 3339 time", fault, reset, err)
				}
			}
			if tc.id != "" {
				id, ray := resp.Header.Get(tc.id), resp.Header.Get("Cf-Ray")
				if len(id) < 16 || ray != id[len(id)-16:]+"-SJC" {
					t.Errorf("%s %q: cf-ray %q does not end request id %q", tc.name, fault, ray, id)
				}
			}
		}
	}
}
