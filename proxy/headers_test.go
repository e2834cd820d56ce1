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

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// Upstreams name headers in any case (CDNs send lower case): hop-by-hop
// headers, the upstream's request ids and its Alt-Svc are dropped whatever
// their case, and every other header goes out as the upstream named it.
func TestUpstreamHeadersAnyCase(t *testing.T) {
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Response.Header
		h.DisableNormalizing()
		h.Set("x-request-id", "upstream-id")
		h.Set("request-id", "upstream-id-2")
		h.Set("keep-alive", "timeout=5")
		h.Set("alt-svc", `h3=":443"; ma=86400`)
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
	if strings.Count(head, "\r\nx-request-id:") != 1 || strings.Contains(head, "upstream-id") || strings.Contains(head, "keep-alive: timeout") ||
		strings.Contains(head, "alt-svc") {
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
func tcpUpstream(t testing.TB, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln := wiretest.AcceptEach(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Minute))
			serve(c, bufio.NewReader(c))
		}()
	})
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

// The headers that a Connection header names are hop-by-hop (RFC 9110
// §7.6.1): the client's never reach the upstream, and the upstream's never
// reach the client, whatever the case of the names, however the lists are
// spaced, and over several Connection headers; the others pass.
func TestConnectionNamedHeadersStop(t *testing.T) {
	seen := make(chan string, 1)
	body := `{"id":"x","object":"chat.completion","choices":[]}`
	up := tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		req.Header.DisableNormalizing()
		if err := req.Read(br); err != nil {
			return
		}
		seen <- string(req.Header.Header())
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nconnection: keep-alive, x-up-hop\r\n"+
			"X-Up-Hop: 1\r\nX-Up-Kept: 2\r\nConnection:\tX-Up-Other ,\r\nx-up-other: 3\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	addr := gatewayFor(t, up)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := `{"model":"m","messages":[]}`
	fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
		"Content-Type: application/json\r\nConnection: keep-alive, X-Hop\r\nx-hop: 1\r\nX-Kept: 2\r\nConnection: x-other\r\n"+
		"X-Other: 3\r\nContent-Length: %d\r\n\r\n%s", len(req), req)
	var resp fasthttp.Response
	resp.Header.DisableNormalizing()
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatal(err)
	}
	upHead := strings.ToLower(<-seen)
	if strings.Contains(upHead, "x-hop") || strings.Contains(upHead, "x-other") || strings.Contains(upHead, "\r\nconnection:") {
		t.Errorf("headers the client's Connection names reached the upstream:\n%s", upHead)
	}
	if !strings.Contains(upHead, "\r\nx-kept: 2\r\n") || !strings.Contains(upHead, "\r\ncontent-type: application/json\r\n") {
		t.Errorf("the client's other headers did not reach the upstream:\n%s", upHead)
	}
	head := strings.ToLower(string(resp.Header.Header()))
	if strings.Contains(head, "x-up-hop") || strings.Contains(head, "x-up-other") || strings.Contains(head, "x-up") && !strings.Contains(head, "\r\nx-up-kept: 2\r\n") {
		t.Errorf("headers the upstream's Connection names reached the client, or others did not:\n%s", head)
	}
	if string(resp.Body()) != body {
		t.Errorf("body %q", resp.Body())
	}
}

// A client whose Connection header lists close among other options gets its
// answer with Connection: close, and the connection closes after it; one that
// lists only keep-alive keeps it.
func TestConnectionCloseInAList(t *testing.T) {
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"x","object":"chat.completion","choices":[]}`)
	})
	for _, c := range []struct {
		conn   string
		closes bool
	}{{"keep-alive, close", true}, {"TE,Close", true}, {"close", true}, {"keep-alive", false}, {"x-close", false}} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		req := `{"model":"m","messages":[]}`
		fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
			"Content-Type: application/json\r\nConnection: %s\r\nContent-Length: %d\r\n\r\n%s", c.conn, len(req), req)
		br := bufio.NewReader(conn)
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("Connection: %s: %v", c.conn, err)
		}
		if resp.StatusCode() != 200 || resp.ConnectionClose() != c.closes {
			t.Errorf("Connection: %s: status %d, close %v", c.conn, resp.StatusCode(), resp.ConnectionClose())
		}
		if c.closes {
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("Connection: %s: the connection stayed open (%v)", c.conn, err)
			}
		}
		conn.Close()
	}
}

// An answer without a Content-Type reaches the client without one: the
// gateway does not put fasthttp's default (text/plain) in the upstream's
// mouth.
func TestNoContentTypeInvented(t *testing.T) {
	addr := gatewayFor(t, rawTCPUpstream(t, func(c net.Conn, _ *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nx-up: 1\r\n\r\n{}")
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := `{"model":"m","messages":[]}`
	fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	raw, _ := io.ReadAll(conn)
	head := strings.ToLower(string(raw[:max(strings.Index(string(raw), "\r\n\r\n"), 0)]))
	if !strings.Contains(head, "\r\nx-up: 1") || strings.Contains(head, "content-type") {
		t.Fatalf("client head:\n%s", raw)
	}
}

// An event stream is known by its media type in any case: a stream whose
// Content-Type is "Text/Event-Stream" and that ends before its final event
// gets the family's error frame, as a lower-case one does.
func TestEventStreamTypeAnyCase(t *testing.T) {
	for _, ct := range []string{"text/event-stream", "Text/Event-Stream; Charset=UTF-8"} {
		addr := gatewayFor(t, rawTCPUpstream(t, func(c net.Conn, _ *bufio.Reader) {
			event := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", ct, len(event), event)
		}))
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		body := `{"model":"m","stream":true,"messages":[]}`
		fmt.Fprintf(conn, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		raw, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.Contains(string(raw), "before its final event") {
			t.Errorf("Content-Type %s: a cut stream ends without the error frame:\n%s", ct, raw)
		}
	}
}
