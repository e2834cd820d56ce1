package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// Pipelined streamed calls on one connection each get their whole answer, in
// order: the end of a stream held back for one write (see clientconn.Conn.HoldTail)
// leaves before the next answer, and a last call with Connection: close gets
// its end before the connection closes.
func TestPipelinedStreamsEndWhole(t *testing.T) {
	conn := dialGateway(t, newEnv(t, nil))
	const calls = 4
	var reqs strings.Builder
	for i := range calls {
		body := fmt.Sprintf(`{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"call %d"}]}`, i)
		extra := "x-sim-events: 5\r\n"
		if i == calls-1 {
			extra += "Connection: close\r\n"
		}
		reqs.WriteString(rawChat(keyA, extra, body))
	}
	if _, err := conn.Write([]byte(reqs.String())); err != nil { // all at once: pipelined
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i := range calls {
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body := resp.Body()
		if resp.StatusCode() != 200 || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
			t.Fatalf("answer %d: status %d, body ending %q", i, resp.StatusCode(), body[max(len(body)-40, 0):])
		}
		if n := bytes.Count(body, []byte("data: ")); n < 6 {
			t.Fatalf("answer %d: %d events, want the 5 chunks and [DONE]", i, n)
		}
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the Connection: close answer: %d bytes, %v; want the connection closed", n, err)
	}
}
