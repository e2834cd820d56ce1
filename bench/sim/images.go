package sim

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// imagesFields: the json tags of openai-go/v3 ImageGenerateParams, plus stream.
var imagesFields = fieldSet(
	"prompt", "frame_count", "frame_duration_ms", "n", "output_compression",
	"partial_images", "safety_identifier", "user", "background", "complexity", "model",
	"moderation", "output_format", "quality", "response_format", "size", "style", "svg",
	"stream",
)

// imageStore keeps the images answered by URL: bounded, oldest evicted first.
// The zero value is not usable: call init. Safe for concurrent use.
type imageStore struct {
	mu    sync.Mutex
	m     map[string][]byte
	order []string
	limit int
}

func (st *imageStore) init(limit int) {
	st.m = make(map[string][]byte)
	st.limit = limit
}

func (st *imageStore) put(id string, b []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.m[id] = b
	st.order = append(st.order, id)
	if len(st.order) > st.limit {
		delete(st.m, st.order[0])
		st.order = st.order[1:]
	}
}

func (st *imageStore) get(id []byte) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.m[b2s(id)]
}

// serveImage answers GET /images/{id}.png: no auth, like a provider's signed URL.
func (s *Server) serveImage(ctx *fasthttp.RequestCtx, name []byte) {
	b := s.images.get(bytes.TrimSuffix(name, []byte(".png")))
	if b == nil {
		betaError(ctx, betaErr{status: 404, msg: "Image not found."})
		return
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType("image/png")
	ctx.SetBody(b)
}

// imageRequest is what an image generation call asks for.
type imageRequest struct {
	w, h   int
	n      int
	asURL  bool
	prompt []byte
}

func (s *Server) imagesGenerate(ctx *fasthttp.RequestCtx, c *control) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famBeta, p)
	if !ok || !checkBetaFields(ctx, v, imagesFields) || !s.checkBetaModel(ctx, v.GetStringBytes("model")) {
		return
	}
	var r imageRequest
	if e := readImageRequest(v, &r); e.status != 0 {
		betaError(ctx, e)
		return
	}
	pngData := appendPaddedPNG(nil, s.basePNG(scaleDims(r.w, r.h, maxSide)), c.imageBytes)
	b := make([]byte, 0, base64.StdEncoding.EncodedLen(len(pngData))*r.n+512)
	b = appendIntField(append(b, '{'), "created", s.now().Unix())
	b = append(b, `,"background":"opaque","data":[`...)
	for i := 0; i < r.n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.appendImage(b, ctx, &r, pngData)
	}
	b = append(b, `],"output_format":"png","quality":"high","size":`...)
	b = append(strconv.AppendInt(append(b, '"'), int64(r.w), 10), 'x')
	b = append(strconv.AppendInt(b, int64(r.h), 10), '"')
	in := estimateTokens(len(r.prompt))
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, in, 10)
	b = append(b, `,"input_tokens_details":{"image_tokens":0,"text_tokens":`...)
	b = strconv.AppendInt(b, in, 10)
	b = append(b, `},"output_tokens":272`...)
	b = appendIntField(b, "total_tokens", in+272)
	setJSON(ctx, 200, append(b, "}}"...))
}

// readImageRequest reads and checks the image parameters; status 0 means valid.
func readImageRequest(v *fastjson.Value, r *imageRequest) betaErr {
	r.prompt = v.GetStringBytes("prompt")
	if len(r.prompt) == 0 {
		return betaErr{status: 400, param: "prompt", code: "missing_required_parameter", msg: "Missing required parameter: 'prompt'."}
	}
	if v.GetBool("stream") {
		return betaErr{status: 400, param: "stream", msg: "Streaming image generation is not supported by this deployment."}
	}
	r.w, r.h = 1024, 1024
	if size := v.GetStringBytes("size"); len(size) > 0 && string(size) != "auto" {
		var ok bool
		if r.w, r.h, ok = parseSize(size); !ok {
			return betaErr{status: 400, param: "size", code: "invalid_value", msg: "Invalid value: '" + string(size) + "'. Supported values are 'auto' and WIDTHxHEIGHT up to 4096x4096."}
		}
	}
	r.n = 1
	if nv := v.Get("n"); nv != nil {
		n, err := nv.Int()
		if err != nil || n < 1 || n > 10 {
			return betaErr{status: 400, param: "n", code: "invalid_value", msg: "Invalid 'n': expected an integer between 1 and 10."}
		}
		r.n = n
	}
	switch string(v.GetStringBytes("response_format")) {
	case "", "b64_json":
	case "url":
		r.asURL = true
	default:
		return betaErr{status: 400, param: "response_format", code: "invalid_value", msg: "Invalid value for 'response_format': expected 'url' or 'b64_json'."}
	}
	return betaErr{}
}

// parseSize parses "WxH" with 1 <= W, H <= 4096.
func parseSize(b []byte) (int, int, bool) {
	ws, hs, ok := bytes.Cut(b, []byte{'x'})
	if !ok {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(string(ws))
	h, err2 := strconv.Atoi(string(hs))
	if err1 != nil || err2 != nil || w < 1 || h < 1 || w > 4096 || h > 4096 {
		return 0, 0, false
	}
	return w, h, true
}

// appendImage appends one data entry: b64_json, or a url served by this simulator.
func (s *Server) appendImage(b []byte, ctx *fasthttp.RequestCtx, r *imageRequest, pngData []byte) []byte {
	if r.asURL {
		id := s.ids.id("img_", 32)
		s.images.put(id, pngData)
		b = appendQuoted(append(b, `{"url":`...), "http://"+string(ctx.Host())+"/images/"+id+".png")
	} else {
		b = append(b, `{"b64_json":"`...)
		b = base64.StdEncoding.AppendEncode(b, pngData)
		b = append(b, '"')
	}
	b = append(b, `,"revised_prompt":`...)
	b = appendQuoted(b, string(r.prompt)+" (rendered by "+s.o.Name+")")
	return append(b, '}')
}
