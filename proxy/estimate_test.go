package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestCutStreamEstimateCoversTokens cuts a stream of each family the gateway
// streams (gamma's generateContent is served for images only, whose answer is
// not a stream) from the simulator after some of its deltas (each carries about 5 tokens: 20 deltas
// of a 400-byte answer) and checks that the output charged by the estimate is
// at least the tokens the simulator streamed up to the cut, and at most three
// times them. The simulator's rate, tokens per byte of answer text, is read
// from the usage of the same stream uncut.
func TestCutStreamEstimateCoversTokens(t *testing.T) {
	e, clk := limitEnv(t, "{tokens_per_minute: 1000000}")
	bearerA := map[string]string{"Authorization": "Bearer " + keyA, "x-sim-events": "20"}
	f := func(name, path string, h map[string]string, body string, cut string, text func(ev map[string]any) string, input func(relayed []byte) int64) {
		t.Helper()
		clk.advance(time.Hour) // the bucket is whole again
		waitCharged(t, e, 0)
		status, _, whole := e.do("POST", path, h, body)
		if status != 200 {
			t.Fatalf("%s: %d %s", name, status, whole)
		}
		allText, _ := streamText(t, whole, text)
		waitFor(t, name+": the whole stream charged", func() bool { return tokensUsed(t, e) > 0 })
		used := tokensUsed(t, e)
		wholeOut := used - input(whole)

		clk.advance(time.Hour)
		waitCharged(t, e, 0)
		hc := map[string]string{"x-sim-fault": "cut=" + cut}
		for k, v := range h {
			hc[k] = v
		}
		status, _, cutBody := e.do("POST", path, hc, body)
		if status != 200 {
			t.Fatalf("%s cut: %d %s", name, status, cutBody)
		}
		relayed, events := streamText(t, cutBody, text)
		if relayed == 0 || relayed == allText {
			t.Fatalf("%s: the cut stream relayed %d of %d bytes of text: %s", name, relayed, allText, cutBody)
		}
		streamed := (relayed*wholeOut + allText - 1) / allText // tokens up to the cut, rounded up
		waitFor(t, name+": the cut stream charged", func() bool { return tokensUsed(t, e) > 0 })
		out := tokensUsed(t, e) - input(cutBody)
		t.Logf("%s: %d events, %d bytes of text (%d tokens) relayed; %d output tokens charged", name, events, relayed, streamed, out)
		if out < streamed || out > 3*max(streamed, events) {
			t.Fatalf("%s: %d output tokens charged for %d streamed in %d events", name, out, streamed, events)
		}
	}
	reported := func(field string) func([]byte) int64 {
		return func(b []byte) int64 { return fieldInt(t, b, field) }
	}
	halfBody := func(body string) func([]byte) int64 {
		return func([]byte) int64 { return int64(len(body)+1) / 2 }
	}
	alphaBody := `{"model":"chat-model","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	f("alpha", messagesPath, bearerA, alphaBody, "8", alphaDeltaText, reported(`"input_tokens":`))
	f("beta chat", chatPath, bearerA, streamChatBody, "6", chatDeltaText, halfBody(streamChatBody))
	respBody := `{"model":"plain-model","stream":true,"input":"Say hello"}`
	f("beta responses", "/v1/router/beta/v1/responses", bearerA, respBody, "9", func(ev map[string]any) string {
		if ev["type"] != "response.output_text.delta" {
			return ""
		}
		s, _ := ev["delta"].(string)
		return s
	}, halfBody(respBody))
}

// streamText returns the bytes of answer text that text finds in the data
// events of an SSE body, and the number of its events (the gateway's error
// frame after a cut aside).
func streamText(t *testing.T, body []byte, text func(ev map[string]any) string) (n, events int64) {
	t.Helper()
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || bytes.Equal(data, []byte("[DONE]")) {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if _, isErr := ev["error"]; isErr || ev["type"] == "error" {
			continue
		}
		events++
		n += int64(len(text(ev)))
	}
	return n, events
}

// alphaDeltaText is the text of an alpha content_block_delta event.
func alphaDeltaText(ev map[string]any) string {
	d, _ := ev["delta"].(map[string]any)
	s, _ := d["text"].(string)
	return s
}

// chatDeltaText is the content of a beta chat chunk's first choice.
func chatDeltaText(ev map[string]any) string {
	cs, _ := ev["choices"].([]any)
	if len(cs) == 0 {
		return ""
	}
	d, _ := cs[0].(map[string]any)["delta"].(map[string]any)
	s, _ := d["content"].(string)
	return s
}
