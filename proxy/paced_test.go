package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

// pacedStream is one paced SSE stream through a gateway over loopback TCP,
// as the harness's llm-streams holds thousands of: the upstream sends one
// frame of a chat stream at each event call, and event returns once the
// client has read it.
type pacedStream struct {
	gw     *Gateway
	next   chan struct{}
	br     *bufio.Reader
	failed error
}

// pacedFrame is a chat stream's content delta, as the simulator sends them.
var pacedFrame = []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n")

// newPacedStream opens the stream and reads its head; the client's
// connection closes at the test's end.
func newPacedStream(tb testing.TB) *pacedStream {
	tb.Helper()
	s := &pacedStream{next: make(chan struct{})}
	chunk := fmt.Appendf(nil, "%x\r\n%s\r\n", len(pacedFrame), pacedFrame)
	up := tcpUpstream(tb, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for range s.next {
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
		tb.Fatal(err)
	}
	var ln net.Listener
	s.gw, _, ln = listenGateway(tb, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Minute))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	io.WriteString(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
		"Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	s.br = bufio.NewReaderSize(conn, 4<<10)
	var head fasthttp.ResponseHeader
	if err := head.Read(s.br); err != nil || head.StatusCode() != 200 {
		tb.Fatalf("head: %v %d", err, head.StatusCode())
	}
	return s
}

// event has the upstream send one frame and reads it at the client: the
// chunk's size line, the frame's two lines, the chunk's CRLF. A failure is
// kept in s.failed.
func (s *pacedStream) event() {
	s.next <- struct{}{}
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			s.failed = err
			return
		}
		if string(line) == "\r\n" {
			return
		}
	}
}

// end has the upstream end the stream, and checks that the client got its
// last event.
func (s *pacedStream) end(t *testing.T) {
	t.Helper()
	close(s.next)
	rest := readChunkedBody(t, s.br)
	if !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream's end: %q", rest)
	}
}

// readCalls returns the read system calls the process has made (all its
// threads), or -1 when /proc/self/io does not say.
func readCalls() int {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	_, rest, _ := bytes.Cut(b, []byte("syscr: "))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(string(line))
	if err != nil {
		return -1
	}
	return n
}

// BenchmarkPacedEvent is one event of a paced stream relayed through the
// gateway (see pacedStream): the upstream's write, the gateway's read and
// write, the client's read, each event waited for before the next is sent,
// as a paced stream's are. cpu-ns/op is the whole process's CPU (upstream,
// gateway, client and the runtime) per event, and reads/op its read system
// calls: compare builds of the gateway, not the figures with the harness's,
// which count the proxy alone.
func BenchmarkPacedEvent(b *testing.B) {
	s := newPacedStream(b)
	b.Cleanup(func() { close(s.next) }) // the upstream ends its side
	for range 20 {
		s.event()
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pacedFrame)))
	cpu0, reads0 := processCPU(), readCalls()
	for b.Loop() {
		s.event()
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if reads0 >= 0 {
		b.ReportMetric(float64(readCalls()-reads0)/float64(b.N), "reads/op")
	}
	if s.failed != nil {
		b.Fatal(s.failed)
	}
}
