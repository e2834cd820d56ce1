//go:build !race

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

// A paced event relayed on an open stream, one SSE frame from the upstream
// to the client, allocates nothing in steady state, in the whole process:
// upstream, gateway (which writes the stream outside its server) and client.
func TestPacedEventAllocatesNothing(t *testing.T) {
	next := make(chan struct{})
	frame := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n")
	chunk := fmt.Appendf(nil, "%x\r\n%s\r\n", len(frame), frame)
	up := tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for range next {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
		done := "data: [DONE]\n\n"
		fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(done), done)
	})
	cfg, err := config.Parse([]byte(`
keys: [{id: k, key: key-1}]
upstreams: [{name: u, family: beta, base_url: "http://`+up+`/v1", api_key: up}]
models: [{id: m, upstreams: [u]}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	gw, _, ln := listenGateway(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
		"Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	br := bufio.NewReaderSize(conn, 4<<10)
	var head fasthttp.ResponseHeader
	if err := head.Read(br); err != nil || head.StatusCode() != 200 {
		t.Fatalf("head: %v %d", err, head.StatusCode())
	}
	var failed error
	event := func() {
		next <- struct{}{}
		// The chunk's size line, the frame's two lines, the chunk's CRLF.
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				failed = err
				return
			}
			if string(line) == "\r\n" {
				return
			}
		}
	}
	for range 20 {
		event()
	}
	if gw.openStreams() != 1 {
		t.Fatalf("%d streams written outside the server, want 1", gw.openStreams())
	}
	allocs := testing.AllocsPerRun(200, event)
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per relayed event", allocs)
	}
	close(next)
	rest := readChunkedBody(t, br)
	if !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream's end: %q", rest)
	}
}
