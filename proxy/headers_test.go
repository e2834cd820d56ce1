package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/valyala/fasthttp"
)

// Upstreams name headers in any case (CDNs send lower case): hop-by-hop
// headers and the upstream's request ids are dropped whatever their case,
// and every other header goes out as the upstream named it.
func TestUpstreamHeadersAnyCase(t *testing.T) {
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Response.Header
		h.DisableNormalizing()
		h.Set("x-request-id", "upstream-id")
		h.Set("request-id", "upstream-id-2")
		h.Set("keep-alive", "timeout=5")
		h.Set("openai-processing-ms", "12")
		h.Set("X-RateLimit-Remaining-Requests", "99")
		h.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"x","object":"chat.completion","choices":[]}`)
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","messages":[]}`
	fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	raw, _ := io.ReadAll(conn)
	head := strings.ToLower(string(raw[:strings.Index(string(raw), "\r\n\r\n")]))
	if strings.Count(head, "\r\nx-request-id:") != 1 || strings.Contains(head, "upstream-id") || strings.Contains(head, "keep-alive: timeout") {
		t.Fatalf("upstream hop-by-hop or id headers leaked:\n%s", raw)
	}
	if !strings.Contains(string(raw), "\r\nopenai-processing-ms: 12\r\n") || !strings.Contains(string(raw), "\r\nX-RateLimit-Remaining-Requests: 99\r\n") {
		t.Fatalf("upstream headers not passed as named:\n%s", raw)
	}
}

// rawUpstreamGateway starts a beta upstream served by h and a gateway in front
// of it (key key-1, model m, and the config lines of extra) and returns the
// gateway's address.
func rawUpstreamGateway(t *testing.T, h fasthttp.RequestHandler, extra ...string) string {
	t.Helper()
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &fasthttp.Server{Handler: h}
	go up.Serve(upLn)
	t.Cleanup(func() { up.Shutdown() })
	return gatewayFor(t, upLn.Addr().String(), extra...)
}

// rawTCPUpstream serves, on each connection, one request read whole and
// then respond's bytes as they are written, for answers a fasthttp server
// would not frame that way. It returns the listener's address.
func rawTCPUpstream(t *testing.T, respond func(c net.Conn, br *bufio.Reader)) string {
	return tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		respond(c, br)
	})
}

// tcpUpstream runs serve on each connection it accepts, with a reader on it
// and a deadline of a minute, and closes the connection after. It returns
// the listener's address.
func tcpUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String()
}

// gatewayFor starts a gateway in front of the beta upstream at upstream (key
// key-1, model m, and the config lines of extra) and returns its address.
func gatewayFor(t *testing.T, upstream string, extra ...string) string {
	t.Helper()
	return serveGateway(t, fmt.Sprintf(`
keys: [{id: k, key: key-1}]
upstreams: [{name: u, family: beta, base_url: "http://%s/v1", api_key: up}]
models: [{id: m, upstreams: [u]}]
%s
`, upstream, strings.Join(extra, "\n")), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// serveGateway starts a gateway with the config yaml on a loopback port and
// returns its address; it stops with the test.
func serveGateway(tb testing.TB, yaml string, opts Options) string {
	tb.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	_, _, ln := listenGateway(tb, cfg, opts)
	return ln.Addr().String()
}
