package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// ssePeekSize is the upstream relay's idle read (see package upstream):
// the events below are sized around it.
const ssePeekSize = 96

// An SSE relay waits for events in a small read and takes a bigger buffer only
// while an event comes in. Whatever their sizes and however the upstream
// splits them, events arrive whole and unchanged, and a finished event reaches
// the client before the upstream sends the next one.
func TestSSERelayEventsWholeAndPrompt(t *testing.T) {
	flushes := []struct {
		data string
		ack  int // the upstream sends on once the client has this much of data (0: at once)
	}{
		{"data: a\n\n", 9},
		{"data: " + strings.Repeat("x", ssePeekSize-8) + "\n\n", ssePeekSize}, // fills the idle read exactly
		{"data: " + strings.Repeat("y", 10<<10) + "\n\n", 10<<10 + 8},
		{"data: 1\n\ndata: 2\n\ndata: 3\n\n", 27},
		{"data: " + strings.Repeat("w", ssePeekSize-10) + "\r\n\r\n", ssePeekSize}, // the same, CRLF
		{"data: " + strings.Repeat("z", ssePeekSize-6), 0},                         // fills it, unfinished
		{"zz\n\n", 4},
		{"data: p\n\ndata: unfinished", 9}, // a finished event, then the start of one
		{" event\n\n", 8},
		{"data: [DONE]\n\n", 0},
	}
	var want []byte
	acks := make(chan int, len(flushes))
	ackAt := map[int]bool{}
	for _, f := range flushes {
		if f.ack > 0 {
			ackAt[len(want)+f.ack] = true
		}
		want = append(want, f.data...)
	}
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			sent := 0
			for _, f := range flushes {
				w.WriteString(f.data)
				if err := w.Flush(); err != nil {
					return
				}
				before := sent
				sent += len(f.data)
				if f.ack == 0 {
					continue
				}
				select {
				case got := <-acks:
					if got != before+f.ack {
						t.Errorf("client acknowledged %d bytes, want %d", got, before+f.ack)
						return
					}
				case <-time.After(5 * time.Second):
					t.Errorf("client never received the first %d bytes: a finished event was held back", before+f.ack)
					return
				}
			}
		})
	})

	client := &fasthttp.HostClient{Addr: addr, StreamResponseBody: true}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	chatRequest(req, addr, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
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

// Events the upstream sent in one burst leave the gateway in one write: the
// client reads them in a single chunk.
func TestSSERelayCoalescesBufferedChunks(t *testing.T) {
	var events, wire bytes.Buffer
	for i := range 20 {
		ev := fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"word %d\"}}]}\n\n", i)
		events.WriteString(ev)
		fmt.Fprintf(&wire, "%x\r\n%s\r\n", len(ev), ev)
	}
	events.WriteString("data: [DONE]\n\n")
	fmt.Fprintf(&wire, "%x\r\n%s\r\n0\r\n\r\n", len("data: [DONE]\n\n"), "data: [DONE]\n\n")
	addr := gatewayFor(t, rawTCPUpstream(t, func(c net.Conn, br *bufio.Reader) {
		// Headers and every event in one write: they arrive together.
		c.Write(append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"), wire.Bytes()...))
		br.ReadByte() // hold the connection until the gateway drops it
	}))

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","stream":true,"messages":[]}`
	fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	var resp fasthttp.ResponseHeader
	if err := resp.Read(br); err != nil {
		t.Fatal(err)
	}
	var got []byte
	chunks := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 32)
		if err != nil {
			t.Fatalf("chunk size line %q", line)
		}
		data := make([]byte, size+2)
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatal(err)
		}
		if size == 0 {
			break
		}
		chunks++
		got = append(got, data[:size]...)
	}
	if string(got) != events.String() {
		t.Fatalf("relayed body differs:\n got %q\nwant %q", got, events.String())
	}
	if chunks != 1 {
		t.Fatalf("the burst left in %d chunks, want 1", chunks)
	}
}

// An SSE body the upstream frames by length or by closing the connection,
// instead of chunks, is relayed whole too.
func TestSSERelayUnchunkedUpstream(t *testing.T) {
	events := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n"
	for name, head := range map[string]string{
		"content-length": fmt.Sprintf("Content-Length: %d\r\n", len(events)),
		"close":          "Connection: close\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			addr := gatewayFor(t, rawTCPUpstream(t, func(c net.Conn, _ *bufio.Reader) {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"+head+"\r\n")
				for _, ev := range strings.SplitAfter(events, "\n\n") {
					io.WriteString(c, ev) // an event per write
					time.Sleep(5 * time.Millisecond)
				}
			}))
			client := &fasthttp.HostClient{Addr: addr}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			chatRequest(req, addr, `{"model":"m","stream":true,"messages":[]}`)
			if err := client.Do(req, resp); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 200 || string(resp.Body()) != events {
				t.Fatalf("%d %q, want %q", resp.StatusCode(), resp.Body(), events)
			}
		})
	}
}

// chatRequest makes req a chat completion with body to the gateway at addr,
// with the key of gatewayFor.
func chatRequest(req *fasthttp.Request, addr, body string) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + "/v1/router/beta/v1/chat/completions")
	req.Header.Set("Authorization", "Bearer key-1")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
}
