package sim

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	native "github.com/modelgate/gateway/proxy/family"
)

// betaChatFields: the json tags of openai-go ChatCompletionNewParams, plus stream.
var betaChatFields = fieldSet(
	"messages", "model", "frequency_penalty", "logprobs", "max_completion_tokens",
	"max_tokens", "n", "presence_penalty", "prompt_cache_key", "safety_identifier", "seed",
	"store", "temperature", "top_logprobs", "top_p", "parallel_tool_calls", "user", "audio",
	"logit_bias", "metadata", "modalities", "moderation", "prompt_cache_retention",
	"reasoning_effort", "service_tier", "stop", "stream_options", "verbosity",
	"function_call", "functions", "prediction", "prompt_cache_options", "response_format",
	"tool_choice", "tools", "web_search_options", "stream",
)

// betaErr is an OpenAI error body; empty typ, param and code take their defaults
// (the type by status, null, null).
type betaErr struct {
	status      int
	msg, typ    string
	param, code string
}

// betaError answers the OpenAI error body.
func betaError(ctx *fasthttp.RequestCtx, e betaErr) {
	if e.typ == "" {
		e.typ = native.BetaErrorType(e.status)
	}
	if e.code == "" && e.status == 429 {
		e.code = "rate_limit_exceeded"
	}
	bp := getBuf()
	b := append((*bp)[:0], `{"error":{"message":`...)
	b = appendQuoted(b, e.msg)
	b = appendStrField(b, "type", e.typ)
	b = appendNullableStr(b, "param", e.param)
	b = appendNullableStr(b, "code", e.code)
	b = append(b, "}}"...)
	setJSON(ctx, e.status, b)
	*bp = b
	putBuf(bp)
}

func (s *Server) serveBeta(ctx *fasthttp.RequestCtx, c *control) {
	path := ctx.Path()
	if ctx.IsGet() && bytes.HasPrefix(path, []byte("/images/")) {
		s.serveImage(ctx, path[len("/images/"):])
		return
	}
	if !keyMatches(bearer(ctx.Request.Header.Peek("Authorization")), s.o.BetaKey) {
		betaError(ctx, betaErr{status: 401, code: "invalid_api_key",
			msg: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."})
		return
	}
	if !s.routeBeta(ctx, c, path) {
		betaError(ctx, betaErr{status: 404, msg: "Invalid URL (" + string(ctx.Method()) + " " + string(path) + ")"})
	}
}

// routeBeta serves the authenticated beta endpoints; false means no such endpoint.
func (s *Server) routeBeta(ctx *fasthttp.RequestCtx, c *control, path []byte) bool {
	post, get := ctx.IsPost(), ctx.IsGet()
	switch {
	case post && string(path) == "/v1/chat/completions":
		s.betaChat(ctx, c)
	case post && string(path) == "/v1/responses":
		s.responsesCreate(ctx, c)
	case post && string(path) == "/v1/responses/input_tokens":
		s.responsesInputTokens(ctx)
	case post && string(path) == "/v1/responses/compact":
		s.responsesCompact(ctx)
	case bytes.HasPrefix(path, []byte("/v1/responses/")):
		return s.routeResponse(ctx, path[len("/v1/responses/"):])
	case post && string(path) == "/v1/images/generations":
		s.imagesGenerate(ctx, c)
	case get && string(path) == "/v1/models":
		s.betaModels(ctx)
	case get && bytes.HasPrefix(path, []byte("/v1/models/")):
		s.betaModel(ctx, path[len("/v1/models/"):])
	default:
		return false
	}
	return true
}

// bearer returns the token of an "Authorization: Bearer <token>" value.
func bearer(v []byte) []byte {
	const prefix = "bearer "
	if len(v) < len(prefix) || !bytes.EqualFold(v[:len(prefix)], []byte(prefix)) {
		return nil
	}
	return bytes.TrimSpace(v[len(prefix):])
}

// checkBetaFields answers 400 for an unknown top-level field; it reports false then.
func checkBetaFields(ctx *fasthttp.RequestCtx, v *fastjson.Value, known map[string]struct{}) bool {
	o, _ := v.Object()
	if bad := firstUnknown(o, known); bad != "" {
		betaError(ctx, betaErr{status: 400, msg: "Unrecognized request argument supplied: " + bad})
		return false
	}
	return true
}

// checkBetaModel answers 400 or 404 unless model is present and served.
func (s *Server) checkBetaModel(ctx *fasthttp.RequestCtx, model []byte) bool {
	if len(model) == 0 {
		betaError(ctx, betaErr{status: 400, msg: "you must provide a model parameter"})
		return false
	}
	if !s.knownModel(model) {
		betaError(ctx, betaErr{status: 404, code: "model_not_found",
			msg: "The model `" + string(model) + "` does not exist or you do not have access to it."})
		return false
	}
	return true
}

func missingParam(ctx *fasthttp.RequestCtx, name string) {
	betaError(ctx, betaErr{status: 400, param: name, code: "missing_required_parameter",
		msg: "Missing required parameter: '" + name + "'."})
}

func (s *Server) betaChat(ctx *fasthttp.RequestCtx, c *control) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famBeta, p)
	if !ok || !checkBetaFields(ctx, v, betaChatFields) || !s.checkBetaModel(ctx, v.GetStringBytes("model")) {
		return
	}
	msgs := v.Get("messages")
	if msgs == nil {
		missingParam(ctx, "messages")
		return
	}
	if a, err := msgs.Array(); err != nil || len(a) == 0 {
		betaError(ctx, betaErr{status: 400, param: "messages", code: "empty_array",
			msg: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."})
		return
	}
	stream := v.GetBool("stream")
	if v.Get("stream_options") != nil && !stream {
		betaError(ctx, betaErr{status: 400, param: "stream_options",
			msg: "The 'stream_options' parameter is only allowed when 'stream' is enabled."})
		return
	}
	cs := chatStream{
		id: s.ids.id("chatcmpl-", 29), model: string(v.GetStringBytes("model")),
		created: s.now().Unix(), text: s.text, n: c.events,
		inTok: estimateTokens(len(ctx.Request.Body())), outTok: estimateTokens(len(s.text)),
		usage: v.GetBool("stream_options", "include_usage"),
	}
	if stream {
		s.answerStream(ctx, &cs, c)
		return
	}
	bp := getBuf()
	*bp = cs.appendCompletion((*bp)[:0])
	setJSON(ctx, 200, *bp)
	putBuf(bp)
}

// chatStream is one chat completion: plain, or as its SSE frames.
type chatStream struct {
	id, model, text string
	created         int64
	n               int
	inTok, outTok   int64
	usage           bool
}

func (cs *chatStream) appendHead(b []byte, object string) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, cs.id)
	b = appendStrField(b, "object", object)
	b = appendIntField(b, "created", cs.created)
	b = appendStrField(b, "model", cs.model)
	return append(b, `,"service_tier":"default","system_fingerprint":null,"choices":[`...)
}

func (cs *chatStream) appendUsage(b []byte) []byte {
	b = appendIntField(append(b, '{'), "prompt_tokens", cs.inTok)
	b = appendIntField(b, "completion_tokens", cs.outTok)
	b = appendIntField(b, "total_tokens", cs.inTok+cs.outTok)
	b = appendIntField(append(b, `,"prompt_tokens_details":{`...), "cached_tokens", cachedTokens(cs.inTok))
	b = appendIntField(append(b, `,"audio_tokens":0},"completion_tokens_details":{`...), "reasoning_tokens", reasoningTokens(cs.outTok))
	return append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

func (cs *chatStream) appendCompletion(b []byte) []byte {
	b = cs.appendHead(b, "chat.completion")
	b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
	b = appendQuoted(b, cs.text)
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	return append(cs.appendUsage(b), '}')
}

// frame: a role chunk, n content chunks, the finish chunk, the usage chunk when
// asked for, then [DONE].
func (cs *chatStream) frame(b []byte, i int) ([]byte, bool) {
	last := cs.n + 2
	if cs.usage {
		last++
	}
	switch {
	case i > last:
		return b, false
	case i == last:
		return append(b, "data: [DONE]\n\n"...), true
	}
	b = cs.appendHead(append(b, "data: "...), "chat.completion.chunk")
	switch {
	case i == 0:
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	case i <= cs.n:
		b = append(b, `{"index":0,"delta":{"content":`...)
		b = appendQuoted(b, textPiece(cs.text, i-1, cs.n))
		b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
	case i == cs.n+1:
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`...)
	default:
		b = cs.appendUsage(append(b, `],"usage":`...))
		return append(b, "}\n\n"...), true
	}
	if cs.usage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...), true
}

func (cs *chatStream) errorFrame(b []byte, _ int) []byte {
	return append(b, "data: {\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"...)
}

// modelIDs returns the listed models: Options.Models, or one default model.
func (s *Server) modelIDs() []string {
	if s.o.Models == nil {
		return []string{"sim-model"}
	}
	return s.o.Models
}

const modelCreated = 1700000000

func (s *Server) appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, modelCreated, 10)
	b = appendStrField(b, "owned_by", s.o.Name)
	return append(b, '}')
}

func (s *Server) betaModels(ctx *fasthttp.RequestCtx) {
	b := append([]byte(nil), `{"object":"list","data":[`...)
	for i, m := range s.modelIDs() {
		if i > 0 {
			b = append(b, ',')
		}
		b = s.appendModel(b, m)
	}
	setJSON(ctx, 200, append(b, "]}"...))
}

func (s *Server) betaModel(ctx *fasthttp.RequestCtx, id []byte) {
	for _, m := range s.modelIDs() {
		if m == string(id) {
			setJSON(ctx, 200, s.appendModel(nil, m))
			return
		}
	}
	betaError(ctx, betaErr{status: 404, param: "model", code: "model_not_found",
		msg: "The model '" + string(id) + "' does not exist"})
}
