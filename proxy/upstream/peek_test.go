package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// rawUpstream returns a client whose one connection is answered, after its
// request is read whole, with answer as written; the connection then stays
// open until the test ends.
func rawUpstream(t *testing.T, answer string) *fasthttp.HostClient {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	dial := func(string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(server)); err != nil {
				return
			}
			io.WriteString(server, answer)
			<-done
		}()
		return client, nil
	}
	return &fasthttp.HostClient{Addr: "upstream", Dial: dial, StreamResponseBody: true}
}

// The relay can see into fasthttp's buffer under a streamed upstream body:
// if a fasthttp upgrade moves the fields it reads, this fails rather than
// the relay silently writing one chunk per event again.
func TestUpstreamPeekLayout(t *testing.T) {
	const body = "9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n0\r\n\r\n"
	client := rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://upstream/")
	if err := client.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	p, ok := peekUpstream(resp.BodyStream())
	if !ok {
		t.Fatalf("cannot see into fasthttp's stream %T", resp.BodyStream())
	}
	p.br.Peek(len(body)) // waits until both chunks are buffered
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
