package upstream

import (
	"io"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// The relay reads a traced stream's id and model from its events, as each
// family's provider sends them, and only when asked to and the answer is SSE.
func TestRelayReadsIdentity(t *testing.T) {
	f := func(name string, fam family.Family, responses, ask bool, head, body, wantID, wantModel string) {
		t.Helper()
		var dials int
		client := pipeUpstream(t, &dials, head+chunk(body)+"0\r\n\r\n")
		var r Relay
		defer r.Reset()
		if ask {
			r.ReadIdentity()
		}
		if err := send(t, client, &r, true); err != nil {
			t.Fatal(err)
		}
		var out fasthttp.Response
		r.dep = &Deployment{}
		r.dep.inflight.Add(1)
		r.Stream(&out, fam, responses, nil)
		if _, err := io.Copy(io.Discard, &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r.Close()
		if id, model := r.Identity(); string(id) != wantID || string(model) != wantModel {
			t.Fatalf("%s: id %q model %q, want %q %q", name, id, model, wantID, wantModel)
		}
	}
	chat := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-x","choices":[]}` + "\n\ndata: [DONE]\n\n"
	f("chat", family.Beta, false, true, wiretest.SSEHead, chat, "chatcmpl-1", "gpt-x")
	f("not asked", family.Beta, false, false, wiretest.SSEHead, chat, "", "")
	f("not SSE", family.Beta, false, true, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
		`{"id":"chatcmpl-1","model":"gpt-x"}`, "", "")
	f("responses", family.Beta, true, true, wiretest.SSEHead,
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"model\":\"gpt-x\"}}\n\n"+
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-x\"}}\n\n", "resp_1", "gpt-x")
	f("messages", family.Alpha, false, true, wiretest.SSEHead,
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\"}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "msg_1", "claude-x")
	f("gamma", family.Gamma, false, true, wiretest.SSEHead,
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}],\"modelVersion\":\"gemini-x\",\"responseId\":\"r-1\"}\r\n\r\n", "r-1", "gemini-x")
}
