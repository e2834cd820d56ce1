package sim

import (
	"strconv"

	"github.com/valyala/fastjson"
)

// respState is the status a response object is rendered in.
type respState uint8

const (
	respInProgress respState = iota
	respCompleted
	respFailed
)

// respEcho lists the request fields a response object echoes, with their defaults.
var respEcho = [...]struct{ name, def string }{
	{"background", "false"},
	{"instructions", "null"},
	{"max_output_tokens", "null"},
	{"max_tool_calls", "null"},
	{"metadata", "{}"},
	{"parallel_tool_calls", "true"},
	{"prompt_cache_key", "null"},
	{"reasoning", `{"effort":null,"summary":null}`},
	{"safety_identifier", "null"},
	{"service_tier", `"default"`},
	{"store", "true"},
	{"temperature", "1.0"},
	{"text", `{"format":{"type":"text"},"verbosity":"medium"}`},
	{"tool_choice", `"auto"`},
	{"tools", "[]"},
	{"top_logprobs", "0"},
	{"top_p", "1.0"},
	{"truncation", `"disabled"`},
	{"user", "null"},
}

// respObj is one response of the Responses API, rendered in any state.
type respObj struct {
	id, model, prevID, msgID, text string
	created                        int64
	inTok, outTok                  int64
	echo                           []byte // ,"background":...,"user":... rendered once
}

func (s *Server) newRespObj(v *fastjson.Value, model string, prev *storedResponse) *respObj {
	created := s.now().Unix()
	r := &respObj{
		id: s.ids.timeID("resp_", created, 48), model: model, msgID: s.ids.timeID("msg_", created, 48),
		text: s.text, created: created, outTok: estimateTokens(len(s.text)),
	}
	if prev != nil {
		r.prevID = prev.id
	}
	r.echo = []byte{'{'} // so that the first field gets no comma; replaced below
	for _, f := range respEcho {
		r.echo = appendRawField(r.echo, f.name, v.Get(f.name), f.def)
	}
	r.echo[0] = ','
	return r
}

// appendJSON appends the response object in state st.
func (r *respObj) appendJSON(b []byte, st respState) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, r.id)
	b = append(b, `,"object":"response"`...)
	b = appendIntField(b, "created_at", r.created)
	switch st {
	case respCompleted:
		b = append(b, `,"status":"completed"`...)
		b = appendIntField(b, "completed_at", r.created)
		b = append(b, `,"error":null`...)
	case respFailed:
		b = append(b, `,"status":"failed","completed_at":null,"error":{"code":"server_error","message":"The server had an error while processing your request."}`...)
	default:
		b = append(b, `,"status":"in_progress","completed_at":null,"error":null`...)
	}
	b = append(b, `,"incomplete_details":null`...)
	b = appendStrField(b, "model", r.model)
	b = append(b, `,"output":[`...)
	if st == respCompleted {
		b = r.appendMessage(b, true)
	}
	b = append(b, ']')
	b = appendNullableStr(b, "previous_response_id", r.prevID)
	b = append(b, r.echo...)
	b = appendKey(b, "usage")
	if st == respCompleted {
		b = appendRespUsage(b, r.inTok, r.outTok)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

func appendRespUsage(b []byte, in, out int64) []byte {
	b = appendIntField(append(b, '{'), "input_tokens", in)
	b = append(appendIntField(append(b, `,"input_tokens_details":{`...), "cached_tokens", cachedTokens(in)), '}')
	b = appendIntField(b, "output_tokens", out)
	b = append(appendIntField(append(b, `,"output_tokens_details":{`...), "reasoning_tokens", reasoningTokens(out)), '}')
	b = appendIntField(b, "total_tokens", in+out)
	return append(b, '}')
}

// appendMessage appends the output message item, complete or just started.
func (r *respObj) appendMessage(b []byte, done bool) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, r.msgID)
	if !done {
		return append(b, `,"type":"message","status":"in_progress","content":[],"role":"assistant"}`...)
	}
	b = append(b, `,"type":"message","status":"completed","content":[`...)
	b = r.appendPart(b, r.text)
	return append(b, `],"role":"assistant"}`...)
}

func (r *respObj) appendPart(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	return append(appendQuoted(b, text), '}')
}

// responseStream is the SSE form of a response: response.created, .in_progress,
// .output_item.added, .content_part.added, n × .output_text.delta, .output_text.done,
// .content_part.done, .output_item.done and response.completed.
type responseStream struct {
	r *respObj
	n int
}

func appendEventHead(b []byte, typ string, seq int) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":"...)
	b = appendQuoted(b, typ)
	b = append(b, `,"sequence_number":`...)
	return strconv.AppendInt(b, int64(seq), 10)
}

// appendItemRef appends the item_id, output_index and content_index of a part event.
func (rs *responseStream) appendItemRef(b []byte) []byte {
	b = appendStrField(b, "item_id", rs.r.msgID)
	return append(b, `,"output_index":0,"content_index":0`...)
}

func (rs *responseStream) frame(b []byte, i int) ([]byte, bool) {
	r, k := rs.r, i-4
	switch {
	case i == 0 || i == 1:
		b = appendEventHead(b, [2]string{"response.created", "response.in_progress"}[i], i)
		b = r.appendJSON(appendKey(b, "response"), respInProgress)
	case i == 2 || k == rs.n+2:
		typ, done := "response.output_item.added", i != 2
		if done {
			typ = "response.output_item.done"
		}
		b = append(appendEventHead(b, typ, i), `,"output_index":0`...)
		b = r.appendMessage(appendKey(b, "item"), done)
	case i == 3 || k == rs.n+1:
		typ, text := "response.content_part.added", ""
		if i != 3 {
			typ, text = "response.content_part.done", r.text
		}
		b = rs.appendItemRef(appendEventHead(b, typ, i))
		b = r.appendPart(appendKey(b, "part"), text)
	case k < rs.n:
		b = rs.appendItemRef(appendEventHead(b, "response.output_text.delta", i))
		b = appendStrField(b, "delta", textPiece(r.text, k, rs.n))
		b = append(b, `,"logprobs":[]`...)
	case k == rs.n:
		b = rs.appendItemRef(appendEventHead(b, "response.output_text.done", i))
		b = appendStrField(b, "text", r.text)
		b = append(b, `,"logprobs":[]`...)
	case k == rs.n+3:
		b = appendEventHead(b, "response.completed", i)
		b = r.appendJSON(appendKey(b, "response"), respCompleted)
	default:
		return b, false
	}
	return append(b, "}\n\n"...), true
}

// errorFrame appends an error event followed by response.failed.
func (rs *responseStream) errorFrame(b []byte, i int) []byte {
	b = appendEventHead(b, "error", i)
	b = append(b, `,"code":"server_error","message":"The server had an error while processing your request.","param":null}`+"\n\n"...)
	b = appendEventHead(b, "response.failed", i+1)
	b = rs.r.appendJSON(appendKey(b, "response"), respFailed)
	return append(b, "}\n\n"...)
}
