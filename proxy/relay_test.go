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

// The relay can see into fasthttp's buffer under a streamed upstream body:
// if a fasthttp upgrade moves the fields it reads, this fails rather than
// the relay silently writing one chunk per event again.
func TestUpstreamPeekLayout(t *testing.T) {
	addr := rawTCPUpstream(t, func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n")
		time.Sleep(time.Second)
	})
	client := &fasthttp.HostClient{Addr: addr, StreamResponseBody: true}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + "/")
	if err := client.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	p, ok := peekUpstream(resp.BodyStream())
	if !ok {
		t.Fatalf("cannot see into fasthttp's stream %T", resp.BodyStream())
	}
	eventually(t, "both chunks buffered", func() bool {
		p.br.Peek(1) // fill whatever arrived
		return p.br.Buffered() == len("9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n")
	})
	if *p.contentLength != -1 || *p.chunkLeft != 0 || !p.ready() {
		t.Fatalf("contentLength %d chunkLeft %d ready %v", *p.contentLength, *p.chunkLeft, p.ready())
	}
	buf := make([]byte, 4)
	if n, _ := resp.BodyStream().Read(buf); n != 4 || *p.chunkLeft != 5 || !p.ready() {
		t.Fatalf("after a 4-byte read: n %d chunkLeft %d ready %v", n, *p.chunkLeft, p.ready())
	}
	resp.BodyStream().Read(make([]byte, 64)) // the rest of the first chunk
	resp.BodyStream().Read(make([]byte, 64)) // the second
	if p.ready() {
		t.Fatal("only the final chunk is left, yet ready")
	}
}

func TestChunkBuffered(t *testing.T) {
	for in, want := range map[string]bool{
		"":                               false,
		"9":                              false,
		"9\r":                            false,
		"9\r\n":                          false,
		"9\r\ndata: a\n\n":               false, // no closing CRLF yet
		"9\r\ndata: a\n\n\r":             false,
		"9\r\ndata: a\n\n\r\n":           true,
		"9;ext=1\r\ndata: a\n\n\r\nmore": true,
		"A\r\n0123456789\r\n":            true,
		"a\r\n012345678\r\n":             false,
		"0\r\n\r\n":                      false, // the final chunk
		"zz\r\n":                         false,
		"fffffffff\r\n":                  false, // nine digits: beyond any gathered chunk
	} {
		if got := chunkBuffered([]byte(in)); got != want {
			t.Errorf("chunkBuffered(%q) = %v, want %v", in, got, want)
		}
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

func TestLastEventEnd(t *testing.T) {
	for in, want := range map[string]int{
		"":                           0,
		"data: a":                    0,
		"data: a\n\n":                9,
		"data: a\n\ndata: b":         9,
		"data: a\r\n\r\ndata: b":     11,
		"data: a\n\ndata: b\n\n":     18,
		"data: a\n\ndata: b\r\n\r\n": 20,
	} {
		if got := lastEventEnd([]byte(in)); got != want {
			t.Errorf("lastEventEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// bodyWriterTo is a body that fasthttp relays through WriteTo.
type bodyWriterTo struct {
	io.Reader
	saw io.Writer
}

func (b *bodyWriterTo) SupportsBodyWriteTo() bool { return true }

func (b *bodyWriterTo) WriteTo(w io.Writer) (int64, error) {
	b.saw = w
	return io.Copy(w, b.Reader)
}

// The relay can reach the writer under fasthttp's chunk writer: if a
// fasthttp upgrade moves it, this fails rather than the relay silently
// flushing every chunk again.
func TestChunkWriterLayout(t *testing.T) {
	var resp fasthttp.Response
	body := &bodyWriterTo{Reader: strings.NewReader("data: a\n\n")}
	resp.SetBodyStream(body, -1)
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	if err := resp.Write(bw); err != nil {
		t.Fatal(err)
	}
	if got := chunkWriter(body.saw); got != bw {
		t.Fatalf("chunkWriter(%T) = %p, want the response's writer %p", body.saw, got, bw)
	}
	bw.Flush()
	if !strings.HasSuffix(out.String(), "\r\n\r\n9\r\ndata: a\n\n\r\n0\r\n\r\n") {
		t.Fatalf("response %q", out.String())
	}
}

func TestWriteChunk(t *testing.T) {
	for _, n := range []int{1, 9, 15, 16, 255, 256, 4095, 32 << 10} {
		var out bytes.Buffer
		bw := bufio.NewWriter(&out)
		p := bytes.Repeat([]byte("x"), n)
		if err := writeChunk(bw, p); err != nil {
			t.Fatal(err)
		}
		bw.Flush()
		if want := fmt.Sprintf("%x\r\n%s\r\n", n, p); out.String() != want {
			t.Fatalf("chunk of %d: %.40q, want %.40q", n, out.String(), want)
		}
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
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI("http://" + addr + "/v1/router/beta/v1/chat/completions")
			req.Header.Set("Authorization", "Bearer key-1")
			req.SetBodyString(`{"model":"m","stream":true,"messages":[]}`)
			if err := client.Do(req, resp); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 200 || string(resp.Body()) != events {
				t.Fatalf("%d %q, want %q", resp.StatusCode(), resp.Body(), events)
			}
		})
	}
}
