package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/accesslog"
)

// Secrets the log test plants: configured caller keys, upstream credentials
// and a cookie.
const (
	echoAPIKey   = "up-echo-credential-7f3a9c"
	cookieSecret = "cookie-secret-d41d8cd98f"
)

// echoUpstream answers every request with a response fasthttp cannot parse
// that quotes the request it received, credentials included: fasthttp's
// error for it then carries them.
func echoUpstream(t *testing.T) string {
	return tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			head.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: x"+
			strings.ReplaceAll(head.String(), "\r\n", " ")+"\r\n\r\n")
	})
}

// rawExchange writes req on a new connection and reads whatever comes back
// until the server closes it. A request that does not ask for the close
// half-closes the connection, which also ends the call early when it waits
// on an upstream for long: the client has left.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net, not an assertion
	io.WriteString(c, req)
	if tc, ok := c.(*net.TCPConn); ok && !strings.Contains(req, "Connection: close\r\n") {
		tc.CloseWrite()
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestNoSecretInLogs sends malformed requests over raw TCP, normal ones, and
// calls to an upstream whose garbled answer quotes the gateway's request, all
// carrying real configured keys, upstream credentials, x-gamma-api-key and
// cookies, and scans every operational and access log line and every answer
// for each secret.
func TestNoSecretInLogs(t *testing.T) {
	echo := echoUpstream(t)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: echo-beta, family: beta, base_url: \"http://"+echo+
			"/v1\", api_key: "+echoAPIKey+"}\nmodels:\n  - {id: echo-model, upstreams: [echo-beta]}\n", 1)
		return y
	})
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, srv, ln := listenGateway(t, e.cfg, Options{Store: e.store, Logger: log, AccessLog: accesslog.New(logs, accesslog.JSON)})
	addr := ln.Addr().String()

	const chat = "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
	const gamma = "POST /v1/router/gamma/v1beta/models/image-model:generateContent HTTP/1.1\r\nHost: gw\r\n"
	auth := "Authorization: Bearer " + keyA + "\r\nCookie: sid=" + cookieSecret + "\r\n"
	body := `{"model":"chat-model","messages":[{"role":"user","content":"hi"}]}`
	var answers []string
	for _, req := range []string{
		chat + auth + "Content-Length: abc\r\n\r\n" + body,
		chat + auth + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n" + body,
		strings.ReplaceAll(chat+auth, "\r\n", "\n") + "Content-Length: 2\n\n{}",
		chat + "Authorization: Bearer " + keyA + "\x00\r\nContent-Length: 2\r\n\r\n{}",
		chat + "Authorization: Bearer " + keyB + "\x00x\r\nContent-Length: 2\r\n\r\n{}",
		gamma + "X-Gamma-Api-Key: " + keyA + "\x00\r\nContent-Length: 2\r\n\r\n{}",
		chat + auth + "X-Pad: " + strings.Repeat("p", 20<<10) + "\r\n\r\n",
		chat + auth + "Transfer-Encoding: chunked\r\n\r\nzz" + keyB + "\r\n" + keyA + "\r\n0\r\n\r\n",
		chat + auth + "Transfer-Encoding: chunked\r\n\r\n5\r\n" + keyA + "\r\n0\r\n\r\n",
		keyA + "\r\n" + auth + "\r\n",
		"\x16\x03\x01" + keyB + "\r\n\r\n",
		chat + auth + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
		gamma + "X-Gamma-Api-Key: " + keyA + "\r\nCookie: sid=" + cookieSecret + "\r\nContent-Length: 2\r\n\r\n{}",
	} {
		answers = append(answers, rawExchange(t, addr, req))
	}
	echoBody := `{"model":"echo-model"}`
	got := rawExchange(t, addr, chat+auth+"Connection: close\r\nContent-Length: "+strconv.Itoa(len(echoBody))+"\r\n\r\n"+echoBody)
	if !strings.HasPrefix(got, "HTTP/1.1 502 ") {
		t.Fatalf("echo upstream: %q", got)
	}
	answers = append(answers, got)
	srv.Shutdown()

	out := logs.String()
	if !strings.Contains(out, `"msg":"http server"`) || !strings.Contains(out, `"status":502`) {
		t.Fatalf("the run did not log what it should have:\n%s", out)
	}
	secrets := []string{keyA, keyB, "up-alpha", "up-beta", "up-gamma", echoAPIKey, cookieSecret}
	for _, s := range secrets {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, s) {
				t.Errorf("secret %q in a log line: %s", s, line)
			}
		}
		for i, a := range answers {
			if strings.Contains(a, s) {
				t.Errorf("secret %q in answer %d: %q", s, i, a)
			}
		}
	}
}
