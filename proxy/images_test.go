package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/modelgate/gateway/bench/sim"
)

const dummyGoogKey = "dummy-goog-key-never-forwarded"

// bodyRecorder is an http.RoundTripper that keeps a copy of every request
// body an SDK sends, and of every answer body it gets.
type bodyRecorder struct {
	mu    sync.Mutex
	sent  [][]byte
	got   [][]byte
	heads []http.Header
}

func (rec *bodyRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	rec.mu.Lock()
	rec.sent = append(rec.sent, body)
	rec.got = append(rec.got, answer)
	rec.heads = append(rec.heads, resp.Header.Clone())
	rec.mu.Unlock()
	return resp, nil
}

func (rec *bodyRecorder) last() (sent, got []byte, h http.Header) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := len(rec.sent) - 1
	return rec.sent[n], rec.got[n], rec.heads[n]
}

// gammaClient is a genai client of the gateway at base+prefix with the
// platform key in x-gamma-api-key and a dummy Gemini key, which genai
// insists on sending as x-goog-api-key.
func (e *testEnv) gammaClient(prefix, version, key string, headers map[string]string) (*genai.Client, *bodyRecorder) {
	e.t.Helper()
	rec := &bodyRecorder{}
	h := http.Header{}
	if key != "" {
		h.Set("x-gamma-api-key", key)
	}
	for k, v := range headers {
		h.Set(k, v)
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      dummyGoogKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: rec},
		HTTPOptions: genai.HTTPOptions{BaseURL: e.base + prefix, APIVersion: version, Headers: h},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c, rec
}

func imageConfig(ratio, size string) *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{
		ResponseModalities: []string{"IMAGE"},
		ImageConfig:        &genai.ImageConfig{AspectRatio: ratio, ImageSize: size},
	}
}

// imagePart returns the first inlineData part of an answer.
func imagePart(t *testing.T, resp *genai.GenerateContentResponse) *genai.Part {
	t.Helper()
	if len(resp.Candidates) == 0 || resp.Candidates[0].Content == nil {
		t.Fatalf("answer without candidates: %+v", resp)
	}
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.InlineData != nil {
			return p
		}
	}
	t.Fatalf("answer without an image part: %+v", resp.Candidates[0].Content)
	return nil
}

// pngSize decodes b as a PNG and returns its dimensions.
func pngSize(t *testing.T, b []byte) (int, int) {
	t.Helper()
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG (%d bytes): %v", len(b), err)
	}
	return cfg.Width, cfg.Height
}

// onlyRequest returns the one request the simulators saw, and which one.
func (e *testEnv) onlyRequest() (sim.Request, string) {
	e.t.Helper()
	var got []sim.Request
	var who string
	for i, s := range e.sims {
		for _, r := range s.Requests() {
			got = append(got, r)
			who = []string{"d1", "d2"}[i]
		}
	}
	if len(got) != 1 {
		e.t.Fatalf("want exactly one upstream request, got %d", len(got))
	}
	return got[0], who
}

func TestGenerateContentSDK(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		prefix, want string // want: the deployment a group pins, "" for any
	}{
		{"/v1/router/gamma", ""}, {"/gamma", ""}, {"/gamma/one", "d1"}, {"/gamma/two", "d2"},
	} {
		for _, version := range []string{"v1", "v1beta"} {
			t.Run(strings.TrimPrefix(tc.prefix, "/")+"/"+version, func(t *testing.T) {
				e.resetSims()
				client, rec := e.gammaClient(tc.prefix, version, keyA, nil)
				resp, err := client.Models.GenerateContent(context.Background(), "image-model",
					genai.Text("A lighthouse at dusk"), imageConfig("16:9", "2K"))
				if err != nil {
					t.Fatal(err)
				}
				part := imagePart(t, resp)
				if part.InlineData.MIMEType != "image/png" || len(part.ThoughtSignature) == 0 {
					t.Fatalf("image part: mime %q, signature %q", part.InlineData.MIMEType, part.ThoughtSignature)
				}
				if w, h := pngSize(t, part.InlineData.Data); w != 48 || h != 27 {
					t.Fatalf("2K 16:9 image is %dx%d, want 48x27", w, h)
				}
				if resp.UsageMetadata == nil || resp.UsageMetadata.TotalTokenCount == 0 || len(resp.Candidates[0].SafetyRatings) == 0 {
					t.Fatalf("usageMetadata or safety feedback lost: %+v", resp)
				}

				up, who := e.onlyRequest()
				if tc.want != "" && who != tc.want {
					t.Fatalf("group %s answered by %s", tc.prefix, who)
				}
				if want := "/" + version + "/models/image-model:generateContent"; up.Method != "POST" || up.Path != want {
					t.Fatalf("upstream %s %s, want POST %s", up.Method, up.Path, want)
				}
				if got := up.Header.Values("X-Goog-Api-Key"); len(got) != 1 || got[0] != "up-gamma" {
					t.Fatalf("upstream x-goog-api-key %q, want the deployment's key only", got)
				}
				if up.Header.Get("X-Gamma-Api-Key") != "" || up.Header.Get("Authorization") != "" {
					t.Fatalf("client credentials forwarded: %v", up.Header)
				}
				for k, vs := range up.Header {
					for _, v := range vs {
						if strings.Contains(v, dummyGoogKey) || strings.Contains(v, keyA) {
							t.Fatalf("upstream header %s carries a client key: %q", k, v)
						}
					}
				}
				sent, got, h := rec.last()
				if !bytes.Equal(up.Body, sent) {
					t.Fatalf("body not forwarded byte for byte:\nsent %s\ngot  %s", sent, up.Body)
				}
				if h.Get("Content-Length") != strconv.Itoa(len(got)) {
					t.Fatalf("answer Content-Length %q for %d bytes", h.Get("Content-Length"), len(got))
				}
				for _, field := range []string{`"candidates"`, `"parts"`, `"inlineData"`, `"usageMetadata"`, `"safetyRatings"`, `"thoughtSignature"`} {
					if !bytes.Contains(got, []byte(field)) {
						t.Fatalf("answer lost %s: %.300s", field, got)
					}
				}
			})
		}
	}
}

// TestGenerateContentTwoTurnEdit sends an editing conversation: the second
// turn carries the first answer's model content, thought signature included,
// and the simulator receives it byte for byte on the same deployment.
func TestGenerateContentTwoTurnEdit(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	client, rec := e.gammaClient("/v1/router/gamma", "v1beta", keyA, map[string]string{"x-session-id": "edit-conversation-7"})
	first := genai.Text("A red bicycle")
	resp1, err := client.Models.GenerateContent(ctx, "image-model", first, imageConfig("1:1", "1K"))
	if err != nil {
		t.Fatal(err)
	}
	_, answer1, _ := rec.last()
	var raw1 struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					ThoughtSignature string `json:"thoughtSignature"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(answer1, &raw1); err != nil || len(raw1.Candidates) == 0 {
		t.Fatalf("first answer: %v", err)
	}
	var signature string
	for _, p := range raw1.Candidates[0].Content.Parts {
		if p.ThoughtSignature != "" {
			signature = p.ThoughtSignature
		}
	}
	if signature == "" {
		t.Fatal("the first answer has no thoughtSignature")
	}

	turn2 := append(first, resp1.Candidates[0].Content, genai.NewContentFromText("Make it blue", genai.RoleUser))
	if _, err := client.Models.GenerateContent(ctx, "image-model", turn2, imageConfig("1:1", "1K")); err != nil {
		t.Fatal(err)
	}
	sent2, _, _ := rec.last()
	var ups []sim.Request
	var who []string
	for i, s := range e.sims {
		for _, r := range s.Requests() {
			ups = append(ups, r)
			who = append(who, []string{"d1", "d2"}[i])
		}
	}
	if len(ups) != 2 || who[0] != who[1] {
		t.Fatalf("an editing session must stay on one deployment: %v", who)
	}
	second := ups[1]
	if bytes.Contains(ups[0].Body, []byte("Make it blue")) {
		second = ups[0]
	}
	if !bytes.Equal(second.Body, sent2) {
		t.Fatalf("second turn not forwarded byte for byte:\nsent %.400s\ngot  %.400s", sent2, second.Body)
	}
	if !bytes.Contains(second.Body, []byte(`"thoughtSignature":"`+signature+`"`)) {
		t.Fatalf("second turn lost the thought signature %q: %.400s", signature, second.Body)
	}
}

func TestGenerateContentAffinity(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"contents":[{"role":"user","parts":[{"text":"a cat"}]}],"generationConfig":{"responseModalities":["IMAGE"]}}`
	used := map[string]bool{}
	for i := 0; i < 16; i++ {
		h := map[string]string{"x-gamma-api-key": keyA, "x-session-id": "conv-" + strconv.Itoa(i)}
		var first string
		for j := 0; j < 4; j++ {
			status, rh, b := e.do("POST", "/gamma/v1beta/models/image-model:generateContent", h, body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			d := string(rh.Peek("x-sim-deployment"))
			if j == 0 {
				first = d
			} else if d != first {
				t.Fatalf("session conv-%d moved from %s to %s", i, first, d)
			}
		}
		used[first] = true
	}
	if len(used) != 2 {
		t.Fatalf("16 sessions all landed on %v", used)
	}
}

// TestGenerateContentLargeBodies sends a request carrying a 5 MiB inline
// image (over the server's default body size) and gets a 6 MiB image back:
// both pass whole and unchanged, the answer with its Content-Length.
func TestGenerateContentLargeBodies(t *testing.T) {
	e := newEnv(t, nil)
	inline := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}, 5<<20/8)
	body := `{"contents":[{"role":"user","parts":[{"text":"edit this"},{"inlineData":{"mimeType":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(inline) + `"}}]}],"generationConfig":{"responseModalities":["TEXT","IMAGE"],"imageConfig":{"aspectRatio":"3:4"}}}`
	const size = 6 << 20
	h := map[string]string{"x-gamma-api-key": keyA, "x-sim-image-bytes": strconv.Itoa(size)}
	status, rh, got := e.do("POST", "/v1/router/gamma/v1/models/image-model:generateContent", h, body)
	if status != 200 {
		t.Fatalf("status %d: %.300s", status, got)
	}
	if rh.ContentLength() != len(got) {
		t.Fatalf("Content-Length %d for %d bytes", rh.ContentLength(), len(got))
	}
	up, _ := e.onlyRequest()
	if up.Body == nil || string(up.Body) != body {
		t.Fatalf("the %d-byte request reached the upstream as %d bytes", len(body), len(up.Body))
	}
	var resp genai.GenerateContentResponse
	if err := json.Unmarshal(got, &resp); err != nil {
		t.Fatal(err)
	}
	part := imagePart(t, &resp)
	if len(part.InlineData.Data) != size {
		t.Fatalf("image of %d bytes, want %d", len(part.InlineData.Data), size)
	}
	if w, h := pngSize(t, part.InlineData.Data); w != 24 || h != 32 {
		t.Fatalf("3:4 1K image is %dx%d, want 24x32", w, h)
	}
}

// gammaError is the Gemini error body.
type gammaError struct {
	Error *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func assertGammaError(t *testing.T, status int, body []byte, want int, wantStatus, wantMsg string) {
	t.Helper()
	var v gammaError
	if err := json.Unmarshal(body, &v); err != nil || v.Error == nil || v.Error.Code == nil {
		t.Fatalf("want %d in the gamma error shape, got %d: %s", want, status, body)
	}
	if status != want || *v.Error.Code != want || v.Error.Status != wantStatus {
		t.Fatalf("want %d %s, got HTTP %d: %s", want, wantStatus, status, body)
	}
	if !strings.Contains(v.Error.Message, wantMsg) {
		t.Fatalf("message %q does not say %q", v.Error.Message, wantMsg)
	}
}

const gammaImageBody = `{"contents":[{"role":"user","parts":[{"text":"a cat"}]}],"generationConfig":{"responseModalities":["IMAGE"]}}`

// withExtraModels adds a beta-only image model and a group without gamma.
func withExtraModels(y string) string {
	y = strings.Replace(y, "models:\n", "models:\n  - {id: beta-image, image: true, upstreams: [d1-beta]}\n", 1)
	return strings.Replace(y, "groups:\n", "groups:\n  - {name: nogamma, upstreams: [d1-beta]}\n", 1)
}

func TestGenerateContentRejections(t *testing.T) {
	e := newEnv(t, withExtraModels)
	gk := map[string]string{"x-gamma-api-key": keyA}
	f := func(method, path string, h map[string]string, body string, want int, wantStatus, wantMsg string) {
		t.Helper()
		status, _, got := e.do(method, path, h, body)
		assertGammaError(t, status, got, want, wantStatus, wantMsg)
		if n := len(e.received()); n != 0 {
			t.Fatalf("%s %s: a rejected call reached a provider (%d requests)", method, path, n)
		}
	}
	const p = "/v1/router/gamma/v1beta/models/"
	// eligibility
	f("POST", p+"text-gamma:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "not registered as an image model")
	f("POST", p+"chat-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "not registered as an image model")
	f("POST", p+"no-such-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "not a registered model")
	f("POST", p+"beta-image:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "no gamma deployment")
	f("POST", "/gamma/nogamma/v1/models/image-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "no gamma deployment in group 'nogamma'")
	// credentials
	f("POST", p+"image-model:generateContent", nil, gammaImageBody, 401, "UNAUTHENTICATED", "x-gamma-api-key")
	f("POST", p+"image-model:generateContent", map[string]string{"x-gamma-api-key": "sk-wrong"}, gammaImageBody, 401, "UNAUTHENTICATED", "invalid API key")
	f("POST", p+"image-model:generateContent", map[string]string{"Authorization": "Bearer " + keyA}, gammaImageBody, 401, "UNAUTHENTICATED", "Bearer is not accepted")
	f("POST", p+"image-model:generateContent", map[string]string{"x-goog-api-key": keyA}, gammaImageBody, 401, "UNAUTHENTICATED", "x-gamma-api-key")
	// paths
	f("POST", p+"image-model:streamGenerateContent", gk, gammaImageBody, 400, "INVALID_ARGUMENT", "streaming is not supported")
	f("POST", "/gamma/one/v1beta/models/image-model:streamGenerateContent?alt=sse", gk, gammaImageBody, 400, "INVALID_ARGUMENT", "streaming is not supported")
	f("POST", p+"image-model:countTokens", gk, gammaImageBody, 404, "NOT_FOUND", "only models/{model}:generateContent")
	f("POST", p+"image-model", gk, gammaImageBody, 404, "NOT_FOUND", "generateContent")
	f("POST", "/gamma/v2/models/image-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "use v1 or v1beta")
	f("POST", "/gamma/one/v1alpha/models/image-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "use v1 or v1beta")
	f("POST", "/gamma/three/v1beta/models/image-model:generateContent", gk, gammaImageBody, 404, "NOT_FOUND", "unknown group 'three'")
	f("POST", "/gamma/upload/v1beta/files", gk, `{}`, 400, "INVALID_ARGUMENT", "platform Media")
	f("POST", "/gamma/two/upload/v1beta/files", gk, `{}`, 400, "INVALID_ARGUMENT", "platform Media")
	f("GET", "/v1/router/gamma/v1beta/files", gk, "", 400, "INVALID_ARGUMENT", "platform Media")
	f("GET", "/v1/router/gamma/v1beta/files/abc:download?alt=media", gk, "", 400, "INVALID_ARGUMENT", "platform Media")
	// bodies
	f("POST", p+"image-model:generateContent", gk, `[{"contents":[]}]`, 400, "INVALID_ARGUMENT", "JSON object")
	f("POST", p+"image-model:generateContent", gk, `{"contents":`, 400, "INVALID_ARGUMENT", "not valid JSON")
	f("POST", p+"image-model:generateContent", gk, "", 400, "INVALID_ARGUMENT", "JSON object")
	long := map[string]string{"x-gamma-api-key": keyA, "x-session-id": strings.Repeat("s", 257)}
	f("POST", p+"image-model:generateContent", long, gammaImageBody, 400, "INVALID_ARGUMENT", "x-session-id")
}

func TestGenerateContentBodyTooLarge(t *testing.T) {
	e := newEnv(t, func(y string) string { return y + "limits: {max_image_body_bytes: 4096}\n" })
	gk := map[string]string{"x-gamma-api-key": keyA}
	big := `{"contents":[{"role":"user","parts":[{"text":"` + strings.Repeat("a", 5000) + `"}]}]}`
	status, _, got := e.do("POST", "/gamma/v1beta/models/image-model:generateContent", gk, big)
	assertGammaError(t, status, got, 413, "INVALID_ARGUMENT", "larger than the limit of 4096 bytes")
	status, _, got = e.do("POST", imagesPath, bearer(keyA), `{"model":"image-model","prompt":"`+strings.Repeat("a", 5000)+`"}`)
	assertImagesError(t, status, got, 413, "")
	if len(e.received()) != 0 {
		t.Fatal("an oversized body reached a provider")
	}
	// just under the limit passes
	small := `{"contents":[{"role":"user","parts":[{"text":"` + strings.Repeat("a", 3000) + `"}]}]}`
	if status, _, got := e.do("POST", "/gamma/v1beta/models/image-model:generateContent", gk, small); status != 200 {
		t.Fatalf("a body under the limit: %d %s", status, got)
	}
}

// TestGenerateContentSDKErrors shows genai reading the gateway's rejections:
// the numeric code from the body, the message, and no retry.
func TestGenerateContentSDKErrors(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	f := func(client *genai.Client, model string, want int, wantMsg string) {
		t.Helper()
		_, err := client.Models.GenerateContent(ctx, model, genai.Text("x"), imageConfig("1:1", "1K"))
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != want || !strings.Contains(apiErr.Message, wantMsg) {
			t.Fatalf("want APIError %d %q, got %v", want, wantMsg, err)
		}
	}
	ok, _ := e.gammaClient("/gamma", "v1beta", keyA, nil)
	f(ok, "text-gamma", 404, "not eligible")
	noKey, _ := e.gammaClient("/gamma", "v1beta", "", nil)
	f(noKey, "image-model", 401, "x-gamma-api-key")
	wrong, _ := e.gammaClient("/gamma", "v1beta", keyA+"x", nil)
	f(wrong, "image-model", 401, "invalid API key")
	_, err := ok.Files.Upload(ctx, bytes.NewReader([]byte("\x89PNG\r\n\x1a\n")), &genai.UploadFileConfig{MIMEType: "image/png"})
	// genai flattens this error to text (%s, not %w)
	if err == nil || !strings.Contains(err.Error(), "Error 400") || !strings.Contains(err.Error(), "platform Media") {
		t.Fatalf("upload: want error 400 about platform Media, got %v", err)
	}
	if n := len(e.received()); n != 0 {
		t.Fatalf("rejected calls reached a provider: %d", n)
	}
}

func (e *testEnv) imagesClient(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.base+"/v1/router/beta/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func TestImagesGenerateSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	client := e.imagesClient(keyA)
	const size = 3 << 20
	var raw *http.Response
	resp, err := client.Images.Generate(ctx, openai.ImageGenerateParams{
		Model:  "image-model",
		Prompt: "A watercolor fox",
		Size:   openai.ImageGenerateParamsSize1536x1024,
		N:      openai.Int(2),
	}, option.WithHeader("x-sim-image-bytes", strconv.Itoa(size)), option.WithHeader("x-session-id", "img-1"),
		option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Created == 0 || len(resp.Data) != 2 {
		t.Fatalf("answer: created %d, %d images", resp.Created, len(resp.Data))
	}
	for _, img := range resp.Data {
		b, err := base64.StdEncoding.DecodeString(img.B64JSON)
		if err != nil || len(b) != size {
			t.Fatalf("b64_json: %d bytes, %v", len(b), err)
		}
		if w, h := pngSize(t, b); w != 64 || h != 42 {
			t.Fatalf("1536x1024 image scaled to %dx%d, want 64x42", w, h)
		}
		if !strings.HasPrefix(img.RevisedPrompt, "A watercolor fox") {
			t.Fatalf("revised_prompt %q", img.RevisedPrompt)
		}
	}
	if raw.ContentLength <= 2*size {
		t.Fatalf("answer Content-Length %d", raw.ContentLength)
	}
	up, _ := e.onlyRequest()
	if up.Path != "/v1/images/generations" || up.Header.Get("Authorization") != "Bearer up-beta" {
		t.Fatalf("upstream %s with %q", up.Path, up.Header.Get("Authorization"))
	}
	var sent map[string]any
	if err := json.Unmarshal(up.Body, &sent); err != nil || sent["model"] != "image-model" || sent["prompt"] != "A watercolor fox" || sent["size"] != "1536x1024" {
		t.Fatalf("upstream body %s", up.Body)
	}

	// response_format url: the provider's URL passes through and serves the image.
	e.resetSims()
	resp, err = client.Images.Generate(ctx, openai.ImageGenerateParams{
		Model: "image-model", Prompt: "A fox", ResponseFormat: openai.ImageGenerateParamsResponseFormatURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || resp.Data[0].URL == "" || resp.Data[0].B64JSON != "" {
		t.Fatalf("url answer: %+v", resp.Data)
	}
	hr, err := http.Get(resp.Data[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	pngBytes, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if w, h := pngSize(t, pngBytes); w != 64 || h != 64 {
		t.Fatalf("url image %dx%d", w, h)
	}
}

// TestImagesBodyPassesThrough compares the gateway's answer with the bytes
// the simulator gives for the same request: identical but for the
// per-call fields (created), and the session_id cut out upstream.
func TestImagesBodyPassesThrough(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"model":"image-model","prompt":"A \"quoted\" owl \u00e9","session_id":"owl-1","size":"256x256","quality":"high"}`
	status, h, got := e.do("POST", imagesPath, bearer(keyA), body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, got)
	}
	up, who := e.onlyRequest()
	want := `{"model":"image-model","prompt":"A \"quoted\" owl \u00e9","size":"256x256","quality":"high"}`
	if string(up.Body) != want {
		t.Fatalf("upstream body %s, want %s", up.Body, want)
	}
	if string(h.Peek("x-sim-deployment")) != who || h.ContentLength() != len(got) {
		t.Fatalf("headers: deployment %q (upstream %s), Content-Length %d for %d bytes", h.Peek("x-sim-deployment"), who, h.ContentLength(), len(got))
	}
	var v struct {
		Created int64 `json:"created"`
		Data    []struct {
			B64JSON       string `json:"b64_json"`
			RevisedPrompt string `json:"revised_prompt"`
		} `json:"data"`
		OutputFormat string          `json:"output_format"`
		Usage        json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(got, &v); err != nil || v.Created == 0 || len(v.Data) != 1 || v.OutputFormat != "png" || len(v.Usage) == 0 {
		t.Fatalf("answer %s", got)
	}
	if v.Data[0].RevisedPrompt != `A "quoted" owl é (rendered by `+who+`)` {
		t.Fatalf("revised_prompt %q", v.Data[0].RevisedPrompt)
	}
}

func assertImagesError(t *testing.T, status int, body []byte, want int, param string) {
	t.Helper()
	assertBetaError(t, status, body, want)
	var v betaErrorBody
	if json.Unmarshal(body, &v); param != "" && (v.Error.Param == nil || *v.Error.Param != param) {
		t.Fatalf("want param %q: %s", param, body)
	}
}

func TestImagesRejections(t *testing.T) {
	e := newEnv(t, withExtraModels)
	f := func(h map[string]string, body string, want int, param string) {
		t.Helper()
		status, _, got := e.do("POST", imagesPath, h, body)
		assertImagesError(t, status, got, want, param)
		if n := len(e.received()); n != 0 {
			t.Fatalf("a rejected call reached a provider (%d requests): %s", n, body)
		}
	}
	k := bearer(keyA)
	f(k, `{"prompt":"a cat"}`, 400, "model")
	f(k, `{"model":"","prompt":"a cat"}`, 400, "model")
	f(k, `{"model":"image-model"}`, 400, "prompt")
	f(k, `{"model":"image-model","prompt":null}`, 400, "prompt")
	f(k, `{"model":"image-model","prompt":""}`, 400, "prompt")
	f(k, `{"model":"image-model","prompt":42}`, 400, "prompt")
	f(k, `{"model":"chat-model","prompt":"a cat"}`, 400, "model")
	f(k, `{"model":"text-gamma","prompt":"a cat"}`, 400, "model")
	f(k, `{"model":"no-such-model","prompt":"a cat"}`, 404, "model")
	f(k, `{"model":"image-model","prompt":"a cat"`, 400, "")
	f(k, `["image-model"]`, 400, "")
	f(nil, `{"model":"image-model","prompt":"a cat"}`, 401, "")
	f(map[string]string{"x-gamma-api-key": keyA}, `{"model":"image-model","prompt":"a cat"}`, 401, "")
	f(bearer("sk-wrong"), `{"model":"image-model","prompt":"a cat"}`, 401, "")
	// an image model with gamma deployments only
	e2 := newEnv(t, func(y string) string {
		return strings.Replace(y, "models:\n", "models:\n  - {id: gamma-image, image: true, upstreams: [d1-gamma]}\n", 1)
	})
	status, _, got := e2.do("POST", imagesPath, k, `{"model":"gamma-image","prompt":"a cat"}`)
	assertImagesError(t, status, got, 404, "model")
	if len(e2.received()) != 0 {
		t.Fatal("a rejected call reached a provider")
	}
	// and the beta-only image model is served
	if status, _, got := e.do("POST", imagesPath, k, `{"model":"beta-image","prompt":"a cat"}`); status != 200 {
		t.Fatalf("beta-image: %d %s", status, got)
	}
}
