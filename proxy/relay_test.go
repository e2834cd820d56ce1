package proxy

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// An SSE relay waits for events in a small read and takes a bigger buffer only
// while an event comes in. Whatever their sizes and however the upstream
// splits them, events arrive whole and unchanged, and a finished event reaches
// the client before the upstream sends the next one.
func TestSSERelayEventsWholeAndPrompt(t *testing.T) {
	flushes := []struct {
		data     string
		awaitAck bool // the upstream sends on only once the client has all so far
	}{
		{"data: a\n\n", true},
		{"data: " + strings.Repeat("x", ssePeekSize-8) + "\n\n", true}, // fills the idle read exactly
		{"data: " + strings.Repeat("y", 10<<10) + "\n\n", true},
		{"data: 1\n\ndata: 2\n\ndata: 3\n\n", true},
		{"data: " + strings.Repeat("w", ssePeekSize-10) + "\r\n\r\n", true}, // the same, CRLF
		{"data: " + strings.Repeat("z", ssePeekSize-6), false},              // fills it, unfinished
		{"zz\n\n", true},
		{"data: [DONE]\n\n", false},
	}
	var want []byte
	acks := make(chan int, len(flushes))
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			sent := 0
			for _, f := range flushes {
				w.WriteString(f.data)
				if err := w.Flush(); err != nil {
					return
				}
				sent += len(f.data)
				if !f.awaitAck {
					continue
				}
				select {
				case got := <-acks:
					if got != sent {
						t.Errorf("client acknowledged %d bytes, upstream sent %d", got, sent)
						return
					}
				case <-time.After(5 * time.Second):
					t.Errorf("client never received the %d bytes sent: a finished event was held back", sent)
					return
				}
			}
		})
	})
	ackAt := map[int]bool{}
	for _, f := range flushes {
		want = append(want, f.data...)
		if f.awaitAck {
			ackAt[len(want)] = true
		}
	}

	client := &fasthttp.HostClient{Addr: addr, StreamResponseBody: true}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + "/v1/router/beta/v1/chat/completions")
	req.Header.Set("Authorization", "Bearer key-1")
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	if err := client.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
	var got []byte
	buf := make([]byte, 512)
	stream := resp.BodyStream()
	for {
		n, err := stream.Read(buf)
		before := len(got)
		got = append(got, buf[:n]...)
		for at := range ackAt {
			if before < at && len(got) >= at {
				acks <- at
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("relayed body differs:\n got %d bytes %.200q\nwant %d bytes %.200q", len(got), got, len(want), want)
	}
}
