package sim

import (
	"bytes"
	"encoding/base64"
	"strconv"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	native "github.com/modelgate/gateway/proxy/family"
)

// gammaFields are the top-level fields of a GenerateContentRequest: what genai's
// generateContentParametersToMldev writes, plus model, in lowerCamel and snake_case
// (the API's JSON parser takes both).
var gammaFields = fieldSet(
	"model", "contents", "generationConfig", "safetySettings", "systemInstruction", "tools",
	"toolConfig", "cachedContent", "labels", "serviceTier", "continuationToken", "store",
	"generation_config", "safety_settings", "system_instruction", "tool_config",
	"cached_content", "service_tier", "continuation_token",
)

func appendGammaError(b []byte, status int, msg string) []byte {
	b = appendIntField(append(b, `{"error":{`...), "code", int64(status))
	b = appendStrField(b, "message", msg)
	b = appendStrField(b, "status", native.GammaStatus(status))
	return append(b, "}}"...)
}

// gammaError answers the Gemini error body, which always carries the numeric code.
func gammaError(ctx *fasthttp.RequestCtx, status int, msg string) {
	setJSON(ctx, status, appendGammaError(nil, status, msg))
}

func (s *Server) serveGamma(ctx *fasthttp.RequestCtx, c *control) {
	key := ctx.Request.Header.Peek("x-goog-api-key")
	if len(key) == 0 {
		key = ctx.QueryArgs().Peek("key")
	}
	if !keyMatches(key, s.o.GammaKey) {
		gammaError(ctx, 400, "API key not valid. Please pass a valid API key.")
		return
	}
	ver, model, method, ok := splitGammaPath(ctx.Path())
	if !ok || !ctx.IsPost() || (method != "generateContent" && method != "streamGenerateContent") {
		gammaError(ctx, 404, "Method not found.")
		return
	}
	if !s.knownModel(model) {
		gammaError(ctx, 404, "models/"+string(model)+" is not found for API version "+ver+
			", or is not supported for "+method+". Call ListModels to see the list of available models and their supported methods.")
		return
	}
	s.generateContent(ctx, c, model, method == "streamGenerateContent")
}

// splitGammaPath splits /{v1|v1beta}/models/{model}:{method}.
func splitGammaPath(p []byte) (ver string, model []byte, method string, ok bool) {
	switch {
	case bytes.HasPrefix(p, []byte("/v1beta/models/")):
		ver, p = "v1beta", p[len("/v1beta/models/"):]
	case bytes.HasPrefix(p, []byte("/v1/models/")):
		ver, p = "v1", p[len("/v1/models/"):]
	default:
		return "", nil, "", false
	}
	i := bytes.LastIndexByte(p, ':')
	if i <= 0 {
		return "", nil, "", false
	}
	return ver, p[:i], string(p[i+1:]), true
}

func (s *Server) generateContent(ctx *fasthttp.RequestCtx, c *control, model []byte, stream bool) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famGamma, p)
	if !ok {
		return
	}
	o, _ := v.Object()
	if bad := firstUnknown(o, gammaFields); bad != "" {
		gammaError(ctx, 400, `Invalid JSON payload received. Unknown name "`+bad+`": Cannot find field.`)
		return
	}
	if len(v.GetArray("contents")) == 0 {
		gammaError(ctx, 400, "* GenerateContentRequest.contents: contents is not specified\n")
		return
	}
	g := gammaAnswer{
		model: string(model), respID: s.ids.id("", 22), text: s.text, n: c.events,
		inTok: estimateTokens(len(ctx.Request.Body())), outTok: estimateTokens(len(s.text)),
	}
	if msg := s.readImageConfig(either(v, "generationConfig", "generation_config"), c, &g); msg != "" {
		gammaError(ctx, 400, msg)
		return
	}
	switch {
	case stream && string(ctx.QueryArgs().Peek("alt")) == "sse":
		s.answerStream(ctx, &g, c)
	case stream:
		setJSON(ctx, 200, g.appendArray(nil))
	default:
		setJSON(ctx, 200, g.appendChunk(nil, 0, 1, true))
	}
}

func either(v *fastjson.Value, camel, snake string) *fastjson.Value {
	if r := v.Get(camel); r != nil {
		return r
	}
	return v.Get(snake)
}

// readImageConfig makes g carry an image when gc asks for the IMAGE modality, sized
// by imageConfig.aspectRatio and imageSize. It returns an error message or "".
func (s *Server) readImageConfig(gc *fastjson.Value, c *control, g *gammaAnswer) string {
	if gc == nil || !hasImageModality(either(gc, "responseModalities", "response_modalities")) {
		return ""
	}
	ic := either(gc, "imageConfig", "image_config")
	aw, ah := 1, 1
	if ar := getStr(ic, "aspectRatio", "aspect_ratio"); len(ar) > 0 {
		var ok bool
		if aw, ah, ok = parseRatio(ar); !ok {
			return "* GenerateContentRequest.generation_config.image_config.aspect_ratio: unsupported aspect ratio " + string(ar)
		}
	}
	long := 0
	switch string(getStr(ic, "imageSize", "image_size")) {
	case "", "1K":
		long = 32
	case "2K":
		long = 48
	case "4K":
		long = 64
	default:
		return "* GenerateContentRequest.generation_config.image_config.image_size: must be one of 1K, 2K, 4K"
	}
	w, h := long, max(1, long*ah/aw)
	if ah > aw {
		w, h = max(1, long*aw/ah), long
	}
	g.image = appendPaddedPNG(nil, s.basePNG(w, h), c.imageBytes)
	g.signature = base64.StdEncoding.EncodeToString([]byte("sim-signature:" + s.o.Name + ":" + g.respID))
	return ""
}

func getStr(v *fastjson.Value, camel, snake string) []byte {
	if v == nil {
		return nil
	}
	if b := v.GetStringBytes(camel); b != nil {
		return b
	}
	return v.GetStringBytes(snake)
}

func hasImageModality(m *fastjson.Value) bool {
	if m == nil {
		return false
	}
	arr, _ := m.Array()
	for _, x := range arr {
		if b, _ := x.StringBytes(); bytes.EqualFold(b, []byte("IMAGE")) {
			return true
		}
	}
	return false
}

// parseRatio parses "W:H" with 1 <= W, H <= 100.
func parseRatio(b []byte) (int, int, bool) {
	ws, hs, ok := bytes.Cut(b, []byte{':'})
	if !ok {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(string(ws))
	h, err2 := strconv.Atoi(string(hs))
	if err1 != nil || err2 != nil || w < 1 || h < 1 || w > 100 || h > 100 {
		return 0, 0, false
	}
	return w, h, true
}

// gammaAnswer is one generateContent answer: whole, or as n text chunks followed by
// the image chunk when there is an image.
type gammaAnswer struct {
	model, respID, text string
	image               []byte // PNG, or nil for a text answer
	signature           string // base64 thoughtSignature of the image part
	n                   int
	inTok, outTok       int64
}

// chunks is how many chunks the streamed answer has.
func (g *gammaAnswer) chunks() int {
	if g.image != nil {
		return g.n + 1
	}
	return g.n
}

// appendChunk appends chunk i of n (n == 1: the whole answer); the last one carries
// finishReason, safetyRatings and the full usage.
func (g *gammaAnswer) appendChunk(b []byte, i, n int, whole bool) []byte {
	last := i == n-1
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	b = g.appendParts(b, i, whole)
	b = append(b, `],"role":"model"}`...)
	if last {
		b = append(b, `,"finishReason":"STOP"`...)
	}
	b = append(b, `,"index":0`...)
	if last {
		b = append(b, `,"safetyRatings":[{"category":"HARM_CATEGORY_SEXUALLY_EXPLICIT","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_HATE_SPEECH","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_HARASSMENT","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"NEGLIGIBLE"}]`...)
	}
	b = append(b, `}],"usageMetadata":`...)
	b = g.appendUsage(b, last)
	b = appendStrField(b, "modelVersion", g.model)
	b = appendStrField(b, "responseId", g.respID)
	return append(b, '}')
}

func (g *gammaAnswer) appendParts(b []byte, i int, whole bool) []byte {
	if whole || i < g.n {
		text := g.text
		if !whole {
			text = textPiece(g.text, i, g.n)
		}
		b = appendQuoted(append(b, `{"text":`...), text)
		b = append(b, '}')
	}
	if g.image != nil && (whole || i == g.n) {
		if whole {
			b = append(b, ',')
		}
		b = append(b, `{"inlineData":{"mimeType":"image/png","data":"`...)
		b = base64.StdEncoding.AppendEncode(b, g.image)
		b = append(b, `"},"thoughtSignature":`...)
		b = append(appendQuoted(b, g.signature), '}')
	}
	return b
}

func (g *gammaAnswer) appendUsage(b []byte, full bool) []byte {
	out := int64(0)
	if full {
		out = g.outTok
		if g.image != nil {
			out += 1290
		}
	}
	b = appendIntField(append(b, '{'), "promptTokenCount", g.inTok)
	b = appendIntField(b, "cachedContentTokenCount", cachedTokens(g.inTok))
	thoughts := int64(0)
	if full {
		thoughts = reasoningTokens(g.outTok)
		b = appendIntField(b, "candidatesTokenCount", out)
		b = appendIntField(b, "thoughtsTokenCount", thoughts)
	}
	b = appendIntField(b, "totalTokenCount", g.inTok+out+thoughts)
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, g.inTok, 10)
	return append(b, "}]}"...)
}

// appendArray appends the chunks as one JSON array: streamGenerateContent without alt=sse.
func (g *gammaAnswer) appendArray(b []byte) []byte {
	b = append(b, '[')
	for i, n := 0, g.chunks(); i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.appendChunk(b, i, n, false)
	}
	return append(b, ']')
}

// frame appends chunk i as a bare data frame, as the API frames alt=sse.
func (g *gammaAnswer) frame(b []byte, i int) ([]byte, bool) {
	n := g.chunks()
	if i >= n {
		return b, false
	}
	b = g.appendChunk(append(b, "data: "...), i, n, false)
	return append(b, "\r\n\r\n"...), true
}

func (g *gammaAnswer) errorFrame(b []byte, _ int) []byte {
	b = appendGammaError(append(b, "data: "...), 503, "The model is overloaded. Please try again later.")
	return append(b, "\r\n\r\n"...)
}
