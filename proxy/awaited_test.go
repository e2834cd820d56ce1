package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/clientconn"
)

// Plain calls through the gateway, each sent once the one before has its
// answer, and then one sent before its answer (pipelined), all get their
// answers, in order.
func TestAwaitedCallsThroughTheGateway(t *testing.T) {
	conn := dialGateway(t, newEnv(t, nil))
	call := func(i int) string {
		return rawChat(keyA, "", fmt.Sprintf(`{"model":"plain-model","messages":[{"role":"user","content":"call %d"}]}`, i))
	}
	br := bufio.NewReader(conn)
	answer := func(i int) {
		t.Helper()
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if resp.StatusCode() != 200 || !bytes.Contains(resp.Body(), []byte(`"chat.completion"`)) {
			t.Fatalf("answer %d: status %d, body %.120q", i, resp.StatusCode(), resp.Body())
		}
	}
	for i := range 3 {
		if _, err := io.WriteString(conn, call(i)); err != nil {
			t.Fatal(err)
		}
		answer(i)
	}
	// A call whose body comes well after its head, the head awaited: the
	// body's read does not fail at the wait's bound.
	slow := call(5)
	cut := strings.Index(slow, "\r\n\r\n") + 4 + 10
	io.WriteString(conn, slow[:cut])
	time.Sleep(3 * clientconn.AwaitLimit)
	io.WriteString(conn, slow[cut:])
	answer(5)
	io.WriteString(conn, call(3))
	time.Sleep(50 * time.Millisecond) // the gateway has read call 3 and is answering it
	io.WriteString(conn, call(4))
	answer(3)
	answer(4)
}
