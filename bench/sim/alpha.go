package sim

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	native "github.com/modelgate/gateway/proxy/family"
)

// alphaMessageFields are the top-level fields of a Messages request: the json tags of
// anthropic-sdk-go MessageNewParams and BetaMessageNewParams, plus stream.
var alphaMessageFields = fieldSet(
	"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
	"temperature", "top_k", "top_p", "tools", "tool_choice", "thinking", "service_tier",
	"container", "mcp_servers", "context_management", "inference_geo", "speed",
	"cache_control", "diagnostics", "output_config", "output_format", "compaction",
	"fallbacks", "fallback_credit_token",
)

func fieldSet(names ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}

// alphaError answers the Anthropic error body; request_id matches the request-id header.
func (s *Server) alphaError(ctx *fasthttp.RequestCtx, status int, typ, msg string) {
	bp := getBuf()
	b := append((*bp)[:0], `{"type":"error","error":{"type":`...)
	b = appendQuoted(b, typ)
	b = appendStrField(b, "message", msg)
	b = append(b, '}')
	b = appendKey(b, "request_id")
	b = appendQuotedBytes(b, ctx.Response.Header.Peek("request-id"))
	b = append(b, '}')
	setJSON(ctx, status, b)
	*bp = b
	putBuf(bp)
}

func (s *Server) serveAlpha(ctx *fasthttp.RequestCtx, c *control) {
	if !keyMatches(ctx.Request.Header.Peek("x-api-key"), s.o.AlphaKey) {
		s.alphaError(ctx, 401, "authentication_error", "invalid x-api-key")
		return
	}
	path, post := ctx.Path(), ctx.IsPost()
	switch {
	case post && string(path) == "/v1/messages":
		s.alphaMessages(ctx, c)
	case ctx.IsGet() && string(path) == "/v1/models":
		s.alphaModels(ctx)
	default:
		s.alphaError(ctx, 404, "not_found_error", "Not found")
	}
}

// keyMatches reports whether got is the expected key (any non-empty key when want is "").
func keyMatches(got []byte, want string) bool {
	if want == "" {
		return len(got) > 0
	}
	return subtle.ConstantTimeCompare(got, []byte(want)) == 1
}

func (s *Server) alphaMessages(ctx *fasthttp.RequestCtx, c *control) {
	if len(ctx.Request.Header.Peek("anthropic-version")) == 0 {
		s.alphaError(ctx, 400, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	p := parserPool.Get()
	defer parserPool.Put(p)
	v, ok := s.parseBody(ctx, famAlpha, p)
	if !ok {
		return
	}
	if status, msg := s.checkAlphaRequest(v); status != 0 {
		s.alphaError(ctx, status, native.AlphaErrorType(status), msg)
		return
	}
	m := alphaStream{
		id:     s.ids.id("msg_", 24),
		model:  string(v.GetStringBytes("model")),
		text:   s.text,
		n:      c.events,
		inTok:  estimateTokens(len(ctx.Request.Body())),
		outTok: estimateTokens(len(s.text)),
	}
	if v.GetBool("stream") {
		s.answerStream(ctx, &m, c)
		return
	}
	bp := getBuf()
	*bp = m.appendMessage((*bp)[:0])
	setJSON(ctx, 200, *bp)
	putBuf(bp)
}

// checkAlphaRequest validates a Messages body as the API does; status 0 means valid.
func (s *Server) checkAlphaRequest(v *fastjson.Value) (int, string) {
	o, _ := v.Object()
	if bad := firstUnknown(o, alphaMessageFields); bad != "" {
		return 400, bad + ": Extra inputs are not permitted"
	}
	for _, f := range [...]string{"model", "messages", "max_tokens"} {
		if o.Get(f) == nil {
			return 400, f + ": Field required"
		}
	}
	model := v.GetStringBytes("model")
	if len(model) == 0 {
		return 400, "model: Input should be a valid string"
	}
	if !s.knownModel(model) {
		return 404, "model: " + string(model)
	}
	if _, err := o.Get("max_tokens").Int(); err != nil {
		return 400, "max_tokens: Input should be a valid integer"
	}
	msgs, err := o.Get("messages").Array()
	if err != nil {
		return 400, "messages: Input should be a valid list"
	}
	return checkAlphaMessages(msgs)
}

func checkAlphaMessages(msgs []*fastjson.Value) (int, string) {
	for i, m := range msgs {
		where := "messages." + strconv.Itoa(i)
		switch string(m.GetStringBytes("role")) {
		case "user", "assistant":
		default:
			return 400, where + ".role: Input should be 'user' or 'assistant'"
		}
		content := m.Get("content")
		if content == nil {
			return 400, where + ".content: Field required"
		}
		if content.Type() == fastjson.TypeString {
			continue
		}
		blocks, err := content.Array()
		if err != nil {
			return 400, where + ".content: Input should be a valid list"
		}
		if status, msg := checkAlphaBlocks(where+".content", blocks); status != 0 {
			return status, msg
		}
	}
	return 0, ""
}

func checkAlphaBlocks(where string, blocks []*fastjson.Value) (int, string) {
	for j, b := range blocks {
		at := where + "." + strconv.Itoa(j)
		typ := string(b.GetStringBytes("type"))
		switch typ {
		case "image", "document":
			if status, msg := checkAlphaSource(at+"."+typ+".source", typ, b.Get("source")); status != 0 {
				return status, msg
			}
		case "tool_result":
			if nested := b.GetArray("content"); nested != nil {
				if status, msg := checkAlphaBlocks(at+".content", nested); status != 0 {
					return status, msg
				}
			}
		}
	}
	return 0, ""
}

var alphaImageTypes = [...]string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// checkAlphaSource validates the source of an image or document block: base64 data
// must decode (and an image must be of its declared media type); a file id must be
// known, and this simulator knows none.
func checkAlphaSource(where, kind string, src *fastjson.Value) (int, string) {
	if src == nil {
		return 400, where + ": Field required"
	}
	switch string(src.GetStringBytes("type")) {
	case "base64":
		return checkBase64Source(where, kind, src)
	case "file":
		id := src.GetStringBytes("file_id")
		return 404, fmt.Sprintf("%s.file_id: File not found: %s", where, id)
	case "url", "text", "content":
		return 0, ""
	}
	return 400, where + ".type: Input tag found using 'type' does not match any of the expected tags: 'base64', 'file', 'url'"
}

func checkBase64Source(where, kind string, src *fastjson.Value) (int, string) {
	mt := string(src.GetStringBytes("media_type"))
	if kind == "image" && !isAlphaImageType(mt) {
		return 400, where + ".base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
	}
	data := src.GetStringBytes("data")
	if len(data) == 0 {
		return 400, where + ".base64.data: Field required"
	}
	dec := base64.NewDecoder(base64.StdEncoding, bytes.NewReader(data))
	var head [16]byte
	n, err := io.ReadFull(dec, head[:])
	if err == nil || err == io.ErrUnexpectedEOF {
		_, err = io.Copy(io.Discard, dec)
	}
	if err != nil {
		return 400, where + ".base64.data: The image data is not valid base64."
	}
	if kind == "image" {
		if got := SniffImage(head[:n]); got != mt {
			return 400, fmt.Sprintf("%s.base64.data: The image was specified using the %s media type, but the image appears to be a %s image", where, mt, orUnknown(got))
		}
	}
	return 0, ""
}

func isAlphaImageType(mt string) bool {
	for _, t := range alphaImageTypes {
		if t == mt {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (s *Server) alphaModels(ctx *fasthttp.RequestCtx) {
	b := append([]byte(nil), `{"data":[`...)
	models := s.modelIDs()
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"model","id":`...)
		b = appendQuoted(b, m)
		b = appendStrField(b, "display_name", m)
		b = appendStrField(b, "created_at", "2025-01-01T00:00:00Z")
		b = append(b, '}')
	}
	b = append(b, `],"has_more":false`...)
	b = appendStrField(b, "first_id", models[0])
	b = appendStrField(b, "last_id", models[len(models)-1])
	setJSON(ctx, 200, append(b, '}'))
}

// alphaStream is one Messages answer: plain, or as its SSE frames.
type alphaStream struct {
	id, model, text string
	n               int
	inTok, outTok   int64
}

func (m *alphaStream) appendMessage(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, m.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendQuoted(b, m.model)
	b = append(b, `,"content":[{"type":"text","text":`...)
	b = appendQuoted(b, m.text)
	b = append(b, `}],"stop_reason":"end_turn","stop_sequence":null,"stop_details":null,"usage":`...)
	return append(m.appendUsage(b, m.outTok), '}')
}

func (m *alphaStream) appendUsage(b []byte, out int64) []byte {
	b = appendIntField(append(b, '{'), "input_tokens", m.inTok)
	b = appendIntField(append(b, `,"cache_creation_input_tokens":0`...), "cache_read_input_tokens", cachedTokens(m.inTok))
	b = appendIntField(b, "output_tokens", out)
	return append(b, `,"service_tier":"standard"}`...)
}

// frame: message_start, content_block_start, ping, n deltas, content_block_stop,
// message_delta, message_stop.
func (m *alphaStream) frame(b []byte, i int) ([]byte, bool) {
	switch k := i - 3; {
	case i == 0:
		b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
		b = appendQuoted(b, m.id)
		b = append(b, `,"type":"message","role":"assistant","model":`...)
		b = appendQuoted(b, m.model)
		b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"usage":`...)
		b = append(m.appendUsage(b, 1), "}}"...)
	case i == 1:
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"...)
	case i == 2:
		b = append(b, "event: ping\ndata: {\"type\": \"ping\"}"...)
	case k < m.n:
		b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"...)
		b = append(appendQuoted(b, textPiece(m.text, k, m.n)), "}}"...)
	case k == m.n:
		b = append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}"...)
	case k == m.n+1:
		b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"stop_details\":null},\"usage\":{\"output_tokens\":"...)
		b = append(strconv.AppendInt(b, m.outTok, 10), "}}"...)
	case k == m.n+2:
		b = append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}"...)
	default:
		return b, false
	}
	return append(b, "\n\n"...), true
}

func (m *alphaStream) errorFrame(b []byte, _ int) []byte {
	return append(b, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"...)
}
