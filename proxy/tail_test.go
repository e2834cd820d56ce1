package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Pipelined streamed calls on one connection each get their whole answer, in
// order: the end of a stream held back for one write (see clientConn.HoldTail)
// leaves before the next answer, and a last call with Connection: close gets
// its end before the connection closes.
func TestPipelinedStreamsEndWhole(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a hung test fails, it does not time anything
	const calls = 4
	var reqs strings.Builder
	for i := range calls {
		body := fmt.Sprintf(`{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"call %d"}]}`, i)
		closing := ""
		if i == calls-1 {
			closing = "Connection: close\r\n"
		}
		fmt.Fprintf(&reqs, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nx-sim-events: 5\r\n%sContent-Length: %d\r\n\r\n%s", keyA, closing, len(body), body)
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
