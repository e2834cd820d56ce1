package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

// engines are the relays of FLOOR_ENGINE.
var engines = []string{"lean", "fasthttp"}

// Both engines relay chat calls, on one kept-alive connection, to the
// config's beta upstream with its key, and the upstream's answers come back
// whole.
func TestRelaysChatToTheBetaUpstream(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Setenv("FLOOR_ENGINE", engine)
			c := dialFloor(t, startFloor(t))
			for i := range 3 {
				if status, b := c.chat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != 200 ||
					!strings.Contains(string(b), `"object":"chat.completion"`) {
					t.Fatalf("call %d: %d %s", i, status, b)
				}
			}
			fmt.Fprintf(c.conn, "GET /v1/models HTTP/1.1\r\nHost: floor\r\n\r\n")
			if resp, err := http.ReadResponse(c.br, nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("models: %v %v", resp, err)
			}
		})
	}
}

// Both engines relay a stream as it comes: its events, chunked, and the
// connection serves a call after it.
func TestRelaysAStream(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Setenv("FLOOR_ENGINE", engine)
			c := dialFloor(t, startFloor(t))
			status, b := c.chat(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if status != 200 || !c.chunked || strings.Count(string(b), "data: ") < 20 || !strings.Contains(string(b), "data: [DONE]\n\n") {
				t.Fatalf("not a whole stream: %d, chunked %v: %q", status, c.chunked, b)
			}
			if status, b := c.chat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != 200 ||
				!strings.Contains(string(b), `"object":"chat.completion"`) {
				t.Fatalf("call after the stream: %d %s", status, b)
			}
		})
	}
}

// Both engines relay alpha's messages, streamed and not, to the config's
// alpha upstream with its key in x-api-key and the client's
// anthropic-version (the simulator refuses a call without either), on the
// connection that relays chat calls to beta too.
func TestRelaysMessagesToTheAlphaUpstream(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Setenv("FLOOR_ENGINE", engine)
			c := dialFloor(t, startFloor(t))
			const msg = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]`
			status, b := c.messages(t, msg+`,"stream":true}`)
			if status != 200 || !c.chunked || !strings.Contains(string(b), "event: message_stop") {
				t.Fatalf("not a whole stream: %d, chunked %v: %q", status, c.chunked, b)
			}
			if status, b := c.messages(t, msg+`}`); status != 200 || !strings.Contains(string(b), `"type":"message"`) {
				t.Fatalf("messages: %d %s", status, b)
			}
			if status, b := c.chat(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != 200 ||
				!strings.Contains(string(b), `"object":"chat.completion"`) {
				t.Fatalf("chat after messages: %d %s", status, b)
			}
		})
	}
}

// floorConn is a client's kept-alive connection to a floor relay.
type floorConn struct {
	conn    net.Conn
	br      *bufio.Reader
	chunked bool // the last answer was
}

func dialFloor(t *testing.T, addr string) *floorConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(time.Minute))
	return &floorConn{conn: conn, br: bufio.NewReader(conn)}
}

// chat sends a beta chat call with body and returns the answer's status and
// body.
func (c *floorConn) chat(t *testing.T, body string) (int, []byte) {
	t.Helper()
	fmt.Fprintf(c.conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: floor\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return c.answer(t)
}

// messages sends an alpha messages call with body, with the gateway's key
// as the harness sends it to the floors, and returns the answer's status and
// body.
func (c *floorConn) messages(t *testing.T, body string) (int, []byte) {
	t.Helper()
	fmt.Fprintf(c.conn, "POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: floor\r\nAuthorization: Bearer key-1\r\n"+
		"anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return c.answer(t)
}

// answer reads an answer and returns its status and body.
func (c *floorConn) answer(t *testing.T) (int, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	c.chunked = resp.TransferEncoding != nil
	return resp.StatusCode, b
}

// startFloor starts the relay of FLOOR_ENGINE in front of a simulator and
// returns its address.
func startFloor(t *testing.T) string {
	t.Helper()
	s, err := sim.Listen("127.0.0.1:0", sim.Options{BetaKey: "up-key", AlphaKey: "alpha-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := fmt.Sprintf("listen: \"127.0.0.1:0\"\nstore: {engine: pebble, path: %q}\nkeys:\n  - {id: k, key: key-1}\n"+
		"upstreams:\n  - {name: a, family: alpha, base_url: %q, api_key: alpha-key}\n  - {name: b, family: beta, base_url: %q, api_key: up-key}\n"+
		"models:\n  - {id: m, upstreams: [b]}\n", t.TempDir(), "http://"+s.Addr(), "http://"+s.Addr()+"/v1")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ups, err := upstreamsOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	switch os.Getenv("FLOOR_ENGINE") {
	case "fasthttp":
		go serveFasthttp(ln, ups)
	default:
		go serve(ln, ups)
	}
	return ln.Addr().String()
}
