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

// Both engines (FLOOR_ENGINE unset, then fasthttp, set by TestFasthttpEngine)
// relay chat calls, on one kept-alive connection, to the config's
// beta upstream with its key, and the upstream's answers come back whole.
func TestRelaysChatToTheBetaUpstream(t *testing.T) {
	addr := startFloor(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for i := range 3 {
		fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: floor\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"object":"chat.completion"`) {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	fmt.Fprintf(conn, "GET /v1/models HTTP/1.1\r\nHost: floor\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	}
}

// startFloor starts the relay of FLOOR_ENGINE in front of a simulator and
// returns its address.
func startFloor(t *testing.T) string {
	t.Helper()
	s, err := sim.Listen("127.0.0.1:0", sim.Options{BetaKey: "up-key"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := fmt.Sprintf("listen: \"127.0.0.1:0\"\nstore: {engine: pebble, path: %q}\nkeys:\n  - {id: k, key: key-1}\n"+
		"upstreams:\n  - {name: a, family: alpha, base_url: %q, api_key: x}\n  - {name: b, family: beta, base_url: %q, api_key: up-key}\n"+
		"models:\n  - {id: m, upstreams: [b]}\n", t.TempDir(), "http://"+s.Addr(), "http://"+s.Addr()+"/v1")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	up, err := upstreamOf(cfg)
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
		go serveFasthttp(ln, up)
	default:
		go serve(ln, up)
	}

	return ln.Addr().String()
}

func TestFasthttpEngine(t *testing.T) {
	t.Setenv("FLOOR_ENGINE", "fasthttp")
	TestRelaysChatToTheBetaUpstream(t)
}

// Both engines relay a stream as it comes: its events, chunked, and the
// connection serves a call after it.
func TestRelaysAStream(t *testing.T) {
	for _, engine := range []string{"lean", "fasthttp"} {
		t.Run(engine, func(t *testing.T) {
			t.Setenv("FLOOR_ENGINE", engine)
			addr := startFloor(t)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(time.Minute))
			br := bufio.NewReader(conn)
			for i, body := range []string{`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				`{"model":"m","messages":[{"role":"user","content":"hi"}]}`} {
				fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: floor\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				b, _ := io.ReadAll(resp.Body)
				want := `"object":"chat.completion"`
				if i == 0 {
					want = "data: [DONE]\n\n"
					if resp.TransferEncoding == nil || strings.Count(string(b), "data: ") < 20 {
						t.Fatalf("not a stream: %v %q", resp.TransferEncoding, b)
					}
				}
				if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
				}
			}
		})
	}
}
