package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/valyala/fasthttp"
)

// A beta chat stream is charged on a key with a tokens limit whether or not
// its client asks for the usage (the gateway asks for it and takes what that
// adds out of the client's stream), and a call whose usage never comes is
// charged an estimate (docs/rate-limits.md).

const (
	streamChatBody = `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	// streamChatAsked is streamChatBody as the gateway forwards it on a limited key.
	streamChatAsked = `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"Say hello"}],"stream_options":{"include_usage":true}}`
)

// tokensUsed returns what team-a's tokens bucket holds.
func tokensUsed(t *testing.T, e *testEnv) int64 {
	t.Helper()
	const name = `gateway_ratelimit_used{key="team-a",model="",kind="tokens"} `
	m := e.metricsText()
	i := strings.Index(m, name)
	if i < 0 {
		t.Fatalf("/metrics lacks %s", name)
	}
	rest := m[i+len(name):]
	n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, '\n')], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCharged waits until team-a's tokens bucket holds want: a stream is
// settled when fasthttp closes it, after the client has its last byte.
func waitCharged(t *testing.T, e *testEnv, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := tokensUsed(t, e); got != want; got = tokensUsed(t, e) {
		if time.Now().After(deadline) {
			t.Fatalf("team-a is charged %d tokens after 10s; want %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamUsage returns the input + output tokens that the usage chunk of a
// stream reports.
func streamUsage(t *testing.T, body []byte) int64 {
	t.Helper()
	i := bytes.Index(body, []byte(`"choices":[],"usage":{`))
	if i < 0 {
		t.Fatalf("no usage chunk in %s", body)
	}
	return chatTokens(t, body[i:])
}

// TestChatStreamChargedWithoutIncludeUsage is the case: streams that
// do not ask for their usage no longer pass a tokens limit that stops plain
// calls.
func TestChatStreamChargedWithoutIncludeUsage(t *testing.T) {
	probe := newEnv(t, nil)
	// What the provider reports for the body the gateway forwards.
	status, _, body := probe.do("POST", chatPath, bearer(keyB), streamChatAsked)
	if status != 200 {
		t.Fatalf("probe: %d %s", status, body)
	}
	per := streamUsage(t, body)
	const limit = 300
	e, _ := limitEnv(t, fmt.Sprintf("{tokens_per_minute: %d}", limit))
	admitted := 0
	for i := range 12 {
		status, _, body := e.do("POST", chatPath, bearer(keyA), streamChatBody)
		if status == 429 {
			continue
		}
		if status != 200 || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
			t.Fatalf("stream %d: %d %s", i+1, status, body)
		}
		admitted++
		waitCharged(t, e, int64(admitted)*per)
	}
	// Admitted while the budget is not spent: as many as plain calls of that usage.
	if want := int((limit + per - 1) / per); admitted != want || admitted >= 12 {
		t.Fatalf("%d of 12 streams of %d tokens passed a limit of %d; want %d", admitted, per, limit, want)
	}
	for _, r := range e.received() {
		if string(r.Body) != streamChatAsked {
			t.Fatalf("the provider got %s; want %s", r.Body, streamChatAsked)
		}
	}
}

var (
	chatIDs      = regexp.MustCompile(`"id":"chatcmpl-[0-9A-Za-z]+","object":"chat.completion.chunk","created":[0-9]+`)
	chatIDsClean = `"id":"chatcmpl-X","object":"chat.completion.chunk","created":0`
)

// TestChatStreamStrippedByteForByte: the client of a limited key gets the
// stream a key without limits gets, byte for byte (but the ids and times
// each answer has of its own), without the usage chunk or "usage":null.
func TestChatStreamStrippedByteForByte(t *testing.T) {
	e, _ := limitEnv(t, "{tokens_per_minute: 1000000}")
	for _, events := range []string{"1", "5", "40"} {
		h := map[string]string{"Authorization": "Bearer " + keyA, "x-sim-events": events}
		status, _, limited := e.do("POST", chatPath, h, streamChatBody)
		h["Authorization"] = "Bearer " + keyB
		status2, _, plain := e.do("POST", chatPath, h, streamChatBody)
		if status != 200 || status2 != 200 {
			t.Fatalf("%d %s; %d %s", status, limited, status2, plain)
		}
		if bytes.Contains(limited, []byte(`"usage"`)) {
			t.Fatalf("the limited key's stream shows usage: %s", limited)
		}
		a, b := chatIDs.ReplaceAll(limited, []byte(chatIDsClean)), chatIDs.ReplaceAll(plain, []byte(chatIDsClean))
		if !bytes.Equal(a, b) {
			t.Fatalf("%s events: the limited key's stream\n%s\ndiffers from\n%s", events, a, b)
		}
	}
}

// TestChatStreamIncludeUsageUntouched: a client that asks for the usage
// gets its body forwarded as it sent it and the stream as the provider sent
// it; one that said false gets the stream it asked for, and is charged.
func TestChatStreamIncludeUsageUntouched(t *testing.T) {
	e, _ := limitEnv(t, "{tokens_per_minute: 1000000}")
	asked := `{"model":"plain-model","stream":true,"stream_options":{"include_usage":true},"session_id":"s","messages":[{"role":"user","content":"Say hello"}]}`
	status, _, body := e.do("POST", chatPath, bearer(keyA), asked)
	if status != 200 || !bytes.Contains(body, []byte(`"usage":null}`)) {
		t.Fatalf("%d %s", status, body)
	}
	per := streamUsage(t, body)
	waitCharged(t, e, per)
	want := strings.Replace(asked, `"session_id":"s",`, "", 1)
	if r := e.received(); len(r) != 1 || string(r[0].Body) != want {
		t.Fatalf("the provider got %q; want %q", r[0].Body, want)
	}
	e.resetSims()
	refused := `{"model":"plain-model","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"Say hello"}]}`
	status, _, body = e.do("POST", chatPath, bearer(keyA), refused)
	if status != 200 || bytes.Contains(body, []byte(`"usage"`)) {
		t.Fatalf("%d %s", status, body)
	}
	if r := e.received(); len(r) != 1 || string(r[0].Body) != strings.Replace(refused, "false", "true", 1) {
		t.Fatalf("the provider got %q", r[0].Body)
	}
	if tokensUsed(t, e) <= per {
		waitFor(t, "the second stream charged", func() bool { return tokensUsed(t, e) > per })
	}
}

// TestChatStreamSDKSeesSameChunks: the official Go SDK streaming on a
// limited key sees the chunks it sees on a key without limits, and no usage.
func TestChatStreamSDKSeesSameChunks(t *testing.T) {
	e, _ := limitEnv(t, "{tokens_per_minute: 1000000}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(key string) (int, openai.ChatCompletionAccumulator) {
		stream := e.openai(key).Chat.Completions.NewStreaming(ctx, chatParams("plain-model"), option.WithHeader("x-sim-events", "7"))
		var acc openai.ChatCompletionAccumulator
		n := 0
		for stream.Next() {
			c := stream.Current()
			if len(c.Choices) == 0 || c.Usage.TotalTokens != 0 || c.JSON.Usage.Valid() {
				t.Fatalf("key %s: a chunk with usage or without choices: %s", key, c.RawJSON())
			}
			acc.AddChunk(c)
			n++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return n, acc
	}
	n, acc := read(keyA)
	n2, acc2 := read(keyB)
	if n != n2 || n != 9 || acc.Choices[0].Message.Content != acc2.Choices[0].Message.Content || acc.Usage.TotalTokens != 0 {
		t.Fatalf("limited key: %d chunks %q; unlimited: %d chunks %q", n, acc.Choices[0].Message.Content, n2, acc2.Choices[0].Message.Content)
	}
	waitFor(t, "the SDK's stream charged", func() bool { return tokensUsed(t, e) > 0 })
}

// dataEvents counts the data events of a stream before its error frame.
func dataEvents(body []byte) int64 {
	if i := bytes.Index(body, []byte(`data: {"error"`)); i >= 0 {
		body = body[:i]
	}
	return int64(bytes.Count(body, []byte("data: {")) + bytes.Count(body, []byte("data: [DONE]")))
}

// TestCutStreamChargedEstimate: a stream that the provider cuts before its
// usage is charged the estimate: ceil(request bytes / 2) input, and output
// the larger of one token per event relayed and ceil(text bytes / 2); alpha's
// input comes from its message_start.
func TestCutStreamChargedEstimate(t *testing.T) {
	e, clk := limitEnv(t, "{tokens_per_minute: 1000000}")
	h := map[string]string{"Authorization": "Bearer " + keyA, "x-sim-fault": "cut=4", "x-sim-events": "20"}
	status, _, body := e.do("POST", chatPath, h, streamChatBody)
	if status != 200 || !bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("%d %s", status, body)
	}
	events := dataEvents(body)
	text, _ := streamText(t, body, chatDeltaText)
	want := int64(len(streamChatBody)+1)/2 + max(events, (text+1)/2)
	if events == 0 || text == 0 {
		t.Fatalf("no event relayed: %s", body)
	}
	waitCharged(t, e, want)

	clk.advance(time.Hour) // the bucket is whole again
	waitCharged(t, e, 0)
	stream := `{"model":"chat-model","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	status, _, body = e.do("POST", messagesPath, h, stream)
	if status != 200 || !bytes.Contains(body, []byte("message_start")) || bytes.Contains(body, []byte("message_stop")) {
		t.Fatalf("alpha: %d %s", status, body)
	}
	in := fieldInt(t, body, `"input_tokens":`)
	events = int64(bytes.Count(body, []byte("\n\n"))) - 1 // less the error frame
	text, _ = streamText(t, body, alphaDeltaText)
	waitCharged(t, e, in+max(events, (text+1)/2, fieldInt(t, body, `"output_tokens":`)))
}

// fieldInt reads the first integer after name in body.
func fieldInt(t *testing.T, body []byte, name string) int64 {
	t.Helper()
	i := bytes.Index(body, []byte(name))
	if i < 0 {
		t.Fatalf("no %s in %s", name, body)
	}
	rest := body[i+len(name):]
	n, err := strconv.ParseInt(string(rest[:bytes.IndexAny(rest, ",}")]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLeftStreamChargedEstimate: a client that leaves a stream before its
// usage chunk is charged an estimate, not nothing.
func TestLeftStreamChargedEstimate(t *testing.T) {
	e, _ := limitEnv(t, "{tokens_per_minute: 1000000}")
	conn, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"x-sim-events: 120\r\nx-sim-event-delay: 200ms\r\nContent-Length: %d\r\n\r\n%s", chatPath, keyA, len(streamChatBody), streamChatBody)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	conn.Close()
	waitFor(t, "the stream left charged", func() bool { return tokensUsed(t, e) > 0 })
	if got, least := tokensUsed(t, e), int64(len(streamChatBody)+1)/2+1; got < least {
		t.Fatalf("charged %d; the estimate is at least %d", got, least)
	}
}

// TestAskUsageWithRenamedModel: a deployment's own model name and the
// include_usage the gateway adds go in the one pass that cuts session_id.
func TestAskUsageWithRenamedModel(t *testing.T) {
	got := make(chan string, 1)
	h := withBenchLimits(t, newHotBenchUpstream(t, Options{}, func(ctx *fasthttp.RequestCtx) {
		got <- string(ctx.PostBody())
		ctx.SetContentType("text/event-stream")
		ctx.Response.SetBodyRaw(hotStream)
	}))
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hotRequest(req, []byte(`{"model":"n","session_id":"s","stream":true,"stream_options":{},"messages":[]}`))
	h.do(t, req, resp)
	if body, want := <-got, `{"model":"provider-n","stream":true,"stream_options":{"include_usage":true},"messages":[]}`; body != want {
		t.Fatalf("the provider got %s; want %s", body, want)
	}
	if want := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\ndata: [DONE]\n\n"; string(resp.Body()) != want {
		t.Fatalf("the client got %q", resp.Body())
	}
}

// TestIncludeUsageTwiceRefused: the simulator, like a provider that takes
// the first member, would read false where the gateway read true; the body
// is refused before it reaches a provider.
func TestIncludeUsageTwiceRefused(t *testing.T) {
	e, _ := limitEnv(t, "{tokens_per_minute: 1000000}")
	for _, body := range []string{
		`{"model":"plain-model","stream":true,"stream_options":{"include_usage":false,"include_usage":true},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"plain-model","stream":true,"stream_options":{"Include_Usage":false},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"plain-model","stream":true,"stream_options":{},"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`,
	} {
		status, _, answer := e.do("POST", chatPath, bearer(keyA), body)
		if status != 400 || !strings.Contains(string(answer), `"param":"stream_options`) {
			t.Fatalf("%s: %d %s", body, status, answer)
		}
	}
	if n := len(e.received()); n != 0 {
		t.Fatalf("the providers saw %d calls", n)
	}
}
