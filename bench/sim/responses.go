package sim

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// Top-level fields of the Responses endpoints: the json tags of openai-go/v3
// responses.ResponseNewParams (plus stream), InputTokenCountParams and ResponseCompactParams.
var (
	responsesFields = fieldSet(
		"background", "instructions", "max_output_tokens", "max_tool_calls",
		"parallel_tool_calls", "previous_response_id", "prompt_cache_key", "safety_identifier",
		"store", "temperature", "top_logprobs", "top_p", "user", "context_management",
		"conversation", "include", "metadata", "moderation", "prompt", "prompt_cache_retention",
		"service_tier", "stream_options", "truncation", "access_programs", "input", "model",
		"prompt_cache_options", "reasoning", "text", "tool_choice", "tools", "stream",
	)
	inputTokensFields = fieldSet(
		"instructions", "model", "parallel_tool_calls", "previous_response_id", "conversation",
		"input", "text", "tool_choice", "tools", "personality", "reasoning", "truncation",
	)
	compactFields = fieldSet(
		"model", "instructions", "previous_response_id", "prompt_cache_key", "input",
		"prompt_cache_options", "prompt_cache_retention", "service_tier",
	)
)

func prevNotFound(ctx *fasthttp.RequestCtx, id []byte) {
	betaError(ctx, betaErr{status: 400, param: "previous_response_id", code: "previous_response_not_found",
		msg: "Previous response with id '" + string(id) + "' not found."})
}

func responseNotFound(ctx *fasthttp.RequestCtx, id []byte) {
	betaError(ctx, betaErr{status: 404, msg: "Response with id '" + string(id) + "' not found."})
}

// previous looks up previous_response_id of v. It answers 400 and reports false when
// the id is given but unknown here.
func (s *Server) previous(ctx *fasthttp.RequestCtx, v *fastjson.Value) (*storedResponse, bool) {
	id := v.GetStringBytes("previous_response_id")
	if len(id) == 0 {
		return nil, true
	}
	prev := s.responses.get(id)
	if prev == nil {
		prevNotFound(ctx, id)
		return nil, false
	}
	return prev, true
}

func (s *Server) responsesCreate(ctx *fasthttp.RequestCtx, c *control) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famBeta, p)
	if !ok || !checkBetaFields(ctx, v, responsesFields) {
		return
	}
	prev, ok := s.previous(ctx, v)
	if !ok {
		return
	}
	model := v.GetStringBytes("model")
	if len(model) == 0 && prev != nil {
		model = []byte(prev.model)
	}
	if !s.checkBetaModel(ctx, model) {
		return
	}
	items, err := s.inputItems(v.Get("input"))
	if err != nil {
		betaError(ctx, betaErr{status: 400, param: "input", code: "invalid_type", msg: err.Error()})
		return
	}
	r := s.newRespObj(v, string(model), prev)
	r.inTok = estimateTokens(len(ctx.Request.Body()))
	if v.GetBool("stream") {
		s.storeResponse(v, r, items, streamEndState(c))
		s.answerStream(ctx, &responseStream{r: r, n: c.events}, c)
		return
	}
	body := r.appendJSON(nil, respCompleted)
	s.storeResponse(v, r, items, respCompleted)
	setJSON(ctx, 200, body)
}

// streamEndState is the state a streamed response is stored in, given the faults.
func streamEndState(c *control) respState {
	switch {
	case c.fault.ErrorAfter > 0:
		return respFailed
	case c.fault.CutAfter > 0:
		return respInProgress
	}
	return respCompleted
}

// storeResponse keeps r and its input items unless the request said "store": false.
func (s *Server) storeResponse(v *fastjson.Value, r *respObj, items []inputItem, st respState) {
	if sv := v.Get("store"); sv != nil && sv.Type() == fastjson.TypeFalse {
		return
	}
	s.responses.put(&storedResponse{
		id: r.id, model: r.model, body: r.appendJSON(nil, st),
		items: items, inTok: r.inTok, outTok: r.outTok,
	})
}

// inputItems turns the input of a request into stored input items.
func (s *Server) inputItems(input *fastjson.Value) ([]inputItem, error) {
	if input == nil {
		return nil, nil
	}
	switch input.Type() {
	case fastjson.TypeString:
		text, _ := input.StringBytes()
		return []inputItem{s.messageItem("user", text, nil)}, nil
	case fastjson.TypeArray:
		arr, _ := input.Array()
		items := make([]inputItem, 0, len(arr))
		for _, el := range arr {
			it, err := s.inputItem(el)
			if err != nil {
				return nil, err
			}
			items = append(items, it)
		}
		return items, nil
	}
	return nil, errors.New("Invalid type for 'input': expected one of a string or array of input items, but got " + input.Type().String() + " instead.")
}

func (s *Server) inputItem(el *fastjson.Value) (inputItem, error) {
	if el.Type() != fastjson.TypeObject {
		return inputItem{}, errors.New("Invalid type for 'input[]': expected an object, but got " + el.Type().String() + " instead.")
	}
	typ := el.GetStringBytes("type")
	role := el.GetStringBytes("role")
	if len(role) > 0 && (len(typ) == 0 || string(typ) == "message") {
		content := el.Get("content")
		if content != nil && content.Type() == fastjson.TypeString {
			text, _ := content.StringBytes()
			return s.messageItem(string(role), text, nil), nil
		}
		return s.messageItem(string(role), nil, content), nil
	}
	raw := el.MarshalTo(nil)
	if id := el.GetStringBytes("id"); len(id) > 0 {
		return inputItem{id: string(id), raw: raw}, nil
	}
	id := s.ids.id("item_", 32)
	b := appendStrField([]byte{'{'}, "id", id)
	if len(raw) > 2 {
		b = append(b, ',')
	}
	return inputItem{id: id, raw: append(b, raw[1:]...)}, nil
}

// messageItem makes a message input item from a text or from a content array.
func (s *Server) messageItem(role string, text []byte, content *fastjson.Value) inputItem {
	id := s.ids.id("msg_", 32)
	b := appendStrField([]byte{'{'}, "id", id)
	b = append(b, `,"type":"message","role":`...)
	b = appendQuoted(b, role)
	b = appendKey(b, "content")
	switch {
	case content != nil:
		b = content.MarshalTo(b)
	case role == "assistant":
		b = appendQuotedBytes(append(b, `[{"type":"output_text","text":`...), text)
		b = append(b, "}]"...)
	default:
		b = appendQuotedBytes(append(b, `[{"type":"input_text","text":`...), text)
		b = append(b, "}]"...)
	}
	b = append(b, `,"status":"completed"}`...)
	return inputItem{id: id, role: role, raw: b}
}

// routeResponse serves /v1/responses/{id} and /v1/responses/{id}/input_items.
func (s *Server) routeResponse(ctx *fasthttp.RequestCtx, rest []byte) bool {
	id, sub, _ := bytes.Cut(rest, []byte{'/'})
	switch {
	case len(id) == 0:
		return false
	case len(sub) == 0 && ctx.IsGet():
		if r := s.responses.get(id); r != nil {
			setJSON(ctx, 200, r.body)
		} else {
			responseNotFound(ctx, id)
		}
	case len(sub) == 0 && ctx.IsDelete():
		if !s.responses.delete(id) {
			responseNotFound(ctx, id)
			return true
		}
		b := appendStrField([]byte{'{'}, "id", string(id))
		setJSON(ctx, 200, append(b, `,"object":"response.deleted","deleted":true}`...))
	case string(sub) == "input_items" && ctx.IsGet():
		s.listInputItems(ctx, id)
	default:
		return false
	}
	return true
}

// listInputItems answers one page of a response's input items: after, limit (1..100,
// default 20) and order (asc|desc, default desc) as the API takes them; include is ignored.
func (s *Server) listInputItems(ctx *fasthttp.RequestCtx, id []byte) {
	r := s.responses.get(id)
	if r == nil {
		responseNotFound(ctx, id)
		return
	}
	args := ctx.QueryArgs()
	desc := true
	switch string(args.Peek("order")) {
	case "", "desc":
	case "asc":
		desc = false
	default:
		betaError(ctx, betaErr{status: 400, param: "order", msg: "Invalid value for 'order': expected 'asc' or 'desc'."})
		return
	}
	limit := 20
	if l := args.Peek("limit"); len(l) > 0 {
		n, err := strconv.Atoi(string(l))
		if err != nil || n < 1 || n > 100 {
			betaError(ctx, betaErr{status: 400, param: "limit", msg: "Invalid 'limit': expected an integer between 1 and 100."})
			return
		}
		limit = n
	}
	setJSON(ctx, 200, appendItemPage(nil, orderItems(r.items, desc), args.Peek("after"), limit))
}

func orderItems(items []inputItem, desc bool) []inputItem {
	if !desc {
		return items
	}
	out := make([]inputItem, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return out
}

// appendItemPage appends the list page of items that follows the item after.
func appendItemPage(b []byte, items []inputItem, after []byte, limit int) []byte {
	start := 0
	if len(after) > 0 {
		start = len(items)
		for i, it := range items {
			if it.id == string(after) {
				start = i + 1
				break
			}
		}
	}
	end := min(start+limit, len(items))
	page := items[start:end]
	b = append(b, `{"object":"list","data":[`...)
	for i, it := range page {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it.raw...)
	}
	b = append(b, ']')
	first, last := "", ""
	if len(page) > 0 {
		first, last = page[0].id, page[len(page)-1].id
	}
	b = appendNullableStr(b, "first_id", first)
	b = appendNullableStr(b, "last_id", last)
	b = append(b, `,"has_more":`...)
	b = strconv.AppendBool(b, end < len(items))
	return append(b, '}')
}

func (s *Server) responsesInputTokens(ctx *fasthttp.RequestCtx) {
	s.aux(ctx, inputTokensFields, false, func(v *fastjson.Value, prev *storedResponse) {
		n := estimateTokens(rawLen(v.Get("input")) + rawLen(v.Get("instructions")))
		if prev != nil {
			n += prev.inTok + prev.outTok
		}
		b := append([]byte(nil), `{"object":"response.input_tokens","input_tokens":`...)
		b = strconv.AppendInt(b, n, 10)
		setJSON(ctx, 200, append(b, '}'))
	})
}

// aux serves input_tokens or compact: it parses the body, refuses fields
// outside allowed, looks up its previous_response_id (prev is nil without
// one) and checks its model, which a previous_response_id may stand for
// unless needModel, before serve answers.
func (s *Server) aux(ctx *fasthttp.RequestCtx, allowed map[string]struct{}, needModel bool, serve func(v *fastjson.Value, prev *storedResponse)) {
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famBeta, p)
	if !ok || !checkBetaFields(ctx, v, allowed) {
		return
	}
	prev, ok := s.previous(ctx, v)
	if !ok {
		return
	}
	model := v.GetStringBytes("model")
	if len(model) == 0 && (needModel || prev == nil) {
		missingParam(ctx, "model")
		return
	}
	if len(model) > 0 && !s.checkBetaModel(ctx, model) {
		return
	}
	serve(v, prev)
}

// rawLen is the length of v's JSON, 0 for nil.
func rawLen(v *fastjson.Value) int {
	if v == nil {
		return 0
	}
	var buf [256]byte
	return len(v.MarshalTo(buf[:0]))
}

func (s *Server) responsesCompact(ctx *fasthttp.RequestCtx) {
	s.aux(ctx, compactFields, true, func(v *fastjson.Value, prev *storedResponse) {
		items, err := s.inputItems(v.Get("input"))
		if err != nil {
			betaError(ctx, betaErr{status: 400, param: "input", code: "invalid_type", msg: err.Error()})
			return
		}
		if prev != nil {
			items = append(append([]inputItem(nil), prev.items...), items...)
		}
		setJSON(ctx, 200, s.appendCompaction(nil, items, estimateTokens(len(ctx.Request.Body()))))
	})
}

// appendCompaction appends a response.compaction object: the user messages of
// items followed by one compaction item.
func (s *Server) appendCompaction(b []byte, items []inputItem, inTok int64) []byte {
	created := s.now().Unix()
	b = appendStrField(append(b, '{'), "id", s.ids.timeID("resp_", created, 48))
	b = append(b, `,"object":"response.compaction"`...)
	b = appendIntField(b, "created_at", created)
	b = append(b, `,"output":[`...)
	for _, it := range items {
		if it.role == "user" {
			b = append(append(b, it.raw...), ',')
		}
	}
	b = appendStrField(append(b, '{'), "id", s.ids.id("cmp_", 32))
	b = append(b, `,"type":"compaction","encrypted_content":`...)
	b = appendQuoted(b, s.ids.id("c2ltLWNvbXBhY3Rpb24", 64))
	b = append(b, `}],"usage":`...)
	return append(appendRespUsage(b, inTok, 16), '}')
}
