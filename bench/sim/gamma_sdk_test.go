package sim

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"
)

func gammaClient(t *testing.T, s *Server, key, version string, extra map[string]any) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:  key,
		Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    s.URL(),
			APIVersion: version,
			ExtraBody:  extra,
			Headers:    http.Header{"X-Sim-Events": []string{"3"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func imageConfig(aspect, size string) *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{
		ResponseModalities: []string{"TEXT", "IMAGE"},
		ImageConfig:        &genai.ImageConfig{AspectRatio: aspect, ImageSize: size},
	}
}

func TestGammaImage(t *testing.T) {
	s := startSim(t, Options{Name: "gamma-east"})
	f := func(version, aspect, size string, wantW, wantH int) {
		t.Helper()
		c := gammaClient(t, s, testGammaKey, version, nil)
		res, err := c.Models.GenerateContent(context.Background(), "gemini-image-sim",
			genai.Text("draw a fox"), imageConfig(aspect, size))
		if err != nil {
			t.Fatal(err)
		}
		if res.ResponseID == "" || res.ModelVersion != "gemini-image-sim" || res.UsageMetadata.TotalTokenCount == 0 {
			t.Fatalf("response id %q version %q usage %+v", res.ResponseID, res.ModelVersion, res.UsageMetadata)
		}
		cand := res.Candidates[0]
		if cand.FinishReason != genai.FinishReasonStop || len(cand.SafetyRatings) == 0 || len(cand.Content.Parts) != 2 {
			t.Fatalf("candidate %+v", cand)
		}
		text, img := cand.Content.Parts[0], cand.Content.Parts[1]
		if text.Text != s.text || img.InlineData == nil || img.InlineData.MIMEType != "image/png" || len(img.ThoughtSignature) == 0 {
			t.Fatalf("parts %+v %+v", text, img)
		}
		decoded, err := png.Decode(bytes.NewReader(img.InlineData.Data))
		if err != nil {
			t.Fatal(err)
		}
		if b := decoded.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
			t.Fatalf("%s %s: image %v, want %dx%d", aspect, size, b, wantW, wantH)
		}
		reqs := s.Requests()
		if p := reqs[len(reqs)-1].Path; p != "/"+version+"/models/gemini-image-sim:generateContent" {
			t.Fatalf("path %q", p)
		}
	}
	f("v1beta", "16:9", "2K", 48, 27)
	f("v1", "", "", 32, 32)
	f("v1beta", "9:16", "4K", 36, 64)
}

func TestGammaTextAndStream(t *testing.T) {
	s := startSim(t, Options{})
	c := gammaClient(t, s, testGammaKey, "v1beta", nil)
	ctx := context.Background()
	res, err := c.Models.GenerateContent(ctx, "gemini-sim", genai.Text("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != s.text {
		t.Fatalf("text %q", res.Text())
	}
	var text strings.Builder
	chunks := 0
	for chunk, err := range c.Models.GenerateContentStream(ctx, "gemini-sim", genai.Text("hi"), imageConfig("1:1", "1K")) {
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		for _, p := range chunk.Candidates[0].Content.Parts {
			text.WriteString(p.Text)
			if p.InlineData != nil {
				if _, err := png.Decode(bytes.NewReader(p.InlineData.Data)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if chunks != 4 || text.String() != s.text {
		t.Fatalf("%d chunks, text %q", chunks, text.String())
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.RawQuery != "alt=sse" {
		t.Fatalf("stream query %q", last.RawQuery)
	}
}

// gammaAPIError asserts that err is a genai APIError with code and message.
func gammaAPIError(t *testing.T, err error, code int, status, msg string) {
	t.Helper()
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want genai.APIError, got %T %v", err, err)
	}
	if apiErr.Code != code || apiErr.Status != status || apiErr.Message != msg {
		t.Fatalf("got %d %s %q, want %d %s %q", apiErr.Code, apiErr.Status, apiErr.Message, code, status, msg)
	}
}

func TestGammaErrors(t *testing.T) {
	s := startSim(t, Options{})
	ctx := context.Background()
	_, err := gammaClient(t, s, "wrong", "v1beta", nil).Models.GenerateContent(ctx, "gemini-sim", genai.Text("hi"), nil)
	gammaAPIError(t, err, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")

	leaky := gammaClient(t, s, testGammaKey, "v1beta", map[string]any{"session_id": "s-1"})
	_, err = leaky.Models.GenerateContent(ctx, "gemini-sim", genai.Text("hi"), nil)
	gammaAPIError(t, err, 400, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "session_id": Cannot find field.`)

	_, err = gammaClient(t, s, testGammaKey, "v1beta", nil).Models.GenerateContent(ctx, "gemini-sim",
		genai.Text("hi"), imageConfig("wide", ""))
	gammaAPIError(t, err, 400, "INVALID_ARGUMENT",
		"* GenerateContentRequest.generation_config.image_config.aspect_ratio: unsupported aspect ratio wide")

	// Every config field genai can send on the Gemini API is accepted.
	temp := float32(0.5)
	_, err = gammaClient(t, s, testGammaKey, "v1beta", nil).Models.GenerateContent(ctx, "gemini-sim", genai.Text("hi"),
		&genai.GenerateContentConfig{
			SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser),
			Temperature:       &temp,
			SafetySettings: []*genai.SafetySetting{{Category: genai.HarmCategoryHarassment,
				Threshold: genai.HarmBlockThresholdBlockNone}},
			Tools:         []*genai.Tool{{GoogleSearch: &genai.GoogleSearch{}}},
			ToolConfig:    &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}},
			CachedContent: "cachedContents/abc",
			Labels:        map[string]string{"team": "a"},
		})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	body := string(reqs[len(reqs)-1].Body)
	for _, k := range []string{"contents", "generationConfig", "systemInstruction", "safetySettings", "tools", "toolConfig", "cachedContent", "labels"} {
		if !strings.Contains(body, `"`+k+`":`) {
			t.Fatalf("genai did not send %s: %s", k, body)
		}
	}
}
