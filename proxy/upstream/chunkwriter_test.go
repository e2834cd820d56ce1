package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

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
