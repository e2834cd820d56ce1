package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// Whole answers through the gateway, pipelined or not, reach the client with
// the upstream's headers, once each, in the upstream's order, and without
// the mark.
func TestSplicedAnswersThroughTheGateway(t *testing.T) {
	conn := dialGateway(t, newEnv(t, nil))
	br := bufio.NewReader(conn)
	call := func(i int) string {
		return rawChat(keyA, "", fmt.Sprintf(`{"model":"plain-model","messages":[{"role":"user","content":"call %d"}]}`, i))
	}
	var order string
	answer := func(i int) {
		t.Helper()
		var resp fasthttp.Response
		resp.Header.DisableNormalizing()
		if err := resp.Read(br); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		head := string(resp.Header.Header())
		if resp.StatusCode() != 200 || strings.Contains(head, "x-modelgate-") {
			t.Fatalf("answer %d: status %d, head %q", i, resp.StatusCode(), head)
		}
		var names []string
		for name := range resp.Header.All() {
			names = append(names, string(name))
		}
		got := strings.Join(names, ",")
		if !strings.Contains(got, "x-ratelimit-limit-requests") || !strings.Contains(got, "X-Request-Id") {
			t.Fatalf("answer %d: headers %s", i, got)
		}
		if order == "" {
			order = got
		} else if got != order {
			t.Fatalf("answer %d: headers\n%s\nwant\n%s", i, got, order)
		}
	}
	io.WriteString(conn, call(0))
	answer(0)
	io.WriteString(conn, call(1)+call(2)+call(3)) // pipelined
	for i := 1; i <= 3; i++ {
		answer(i)
	}
	io.WriteString(conn, call(4))
	answer(4)

	// A stream: its head too, its Cache-Control as the relay sets it.
	io.WriteString(conn, rawChat(keyA, "", `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"s"}]}`))
	var resp fasthttp.Response
	resp.Header.DisableNormalizing()
	if err := resp.Read(br); err != nil {
		t.Fatal(err)
	}
	head := string(resp.Header.Header())
	if resp.StatusCode() != 200 || strings.Contains(head, "x-modelgate-") || !strings.Contains(head, "x-ratelimit-limit-requests: ") ||
		strings.Count(head, "Cache-Control: no-cache\r\n") != 1 || !bytes.Contains(resp.Body(), []byte("data: [DONE]")) {
		t.Fatalf("stream: status %d, head %q, body %.200q", resp.StatusCode(), head, resp.Body())
	}
}
