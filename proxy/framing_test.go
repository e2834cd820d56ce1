package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// countedChat is an upstream handler that answers a chat completion and
// counts the calls it gets in calls.
func countedChat(calls *atomic.Int64) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		calls.Add(1)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"x","object":"chat.completion","choices":[]}`)
	}
}

// exchange writes raw to a new connection to addr and reads the answers until
// the gateway closes it. The deadline only bounds a gateway that never
// closes, which fails the test.
func exchange(t *testing.T, addr, raw string) (answers []*http.Response, bodies []string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the gateway kept the connection open after %d answers", len(answers))
			}
			return answers, bodies
		}
		b, _ := io.ReadAll(resp.Body)
		answers, bodies = append(answers, resp), append(bodies, string(b))
	}
}

// A chunked request that also has a Content-Length is refused before any
// upstream call, and the connection closes without its body being read: a
// proxy in front may have framed it by the length, and what follows would be
// read as a request of its own.
func TestFramedTwiceRefused(t *testing.T) {
	var calls atomic.Int64
	addr := rawUpstreamGateway(t, countedChat(&calls))
	body := `{"model":"m","messages":[]}`
	chunked := "1b\r\n" + body + "\r\n0\r\n\r\n"
	smuggled := "GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n\r\n"
	head := "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"
	for _, framing := range []string{
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"transfer-encoding: chunked\r\ncontent-length: 0\r\n",
	} {
		answers, bodies := exchange(t, addr, head+framing+"\r\n"+chunked+smuggled)
		if len(answers) != 1 || answers[0].StatusCode != 400 || !answers[0].Close ||
			!strings.Contains(bodies[0], `"type":"invalid_request_error"`) {
			t.Fatalf("%q: want one 400 in the beta shape and the connection closed, got %d answers %q", framing, len(answers), bodies)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
	// Chunked alone is served, and so is the request after it.
	answers, bodies := exchange(t, addr, head+"Transfer-Encoding: chunked\r\n\r\n"+chunked+
		strings.Replace(smuggled, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
	if len(answers) != 2 || answers[0].StatusCode != 200 || answers[1].StatusCode != 200 {
		t.Fatalf("chunked request: %d answers %q", len(answers), bodies)
	}
}

// A request fasthttp cannot read is answered in the error shape of the
// family its path names, with the status that says why, and the connection
// closes.
func TestMalformedRequestNativeError(t *testing.T) {
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {})
	big := "X-Big: " + strings.Repeat("a", 9<<10) + "\r\n"
	for _, c := range []struct {
		name, raw string
		status    int
		shape     string
	}{
		{"alpha, header without colon", "POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nbroken\r\n\r\n", 400, `"type":"error"`},
		{"gamma, two lengths", "POST /gamma/v1beta/models/g:generateContent HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, `"status":"INVALID_ARGUMENT"`},
		{"beta, negative length", "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: -1\r\n\r\n", 400, `"type":"invalid_request_error"`},
		{"beta, head too large", "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + big + "\r\n", 431, `"type":"invalid_request_error"`},
		{"no request line", "HELLO\r\n\r\n", 400, `"error":{`},
		// RFC 9112 section 5.1: a proxy in front that ignores such a name
		// would frame the body by another header, or by none.
		{"space before a colon", "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400, `"type":"invalid_request_error"`},
		{"HTTP/2.0 in a text request line", "GET /v1/router/beta/v1/models HTTP/2.0\r\nHost: gw\r\n\r\n", 505, `{"error":{"message":"HTTP version HTTP/2.0 is not supported`},
		{"HTTP/9.9", "POST /v1/router/alpha/v1/messages HTTP/9.9\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}", 505, `"type":"error"`},
		{"tab before a colon", "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length\t: 2\r\n\r\n{}", 400, `"type":"invalid_request_error"`},
	} {
		answers, bodies := exchange(t, addr, c.raw)
		if len(answers) != 1 || answers[0].StatusCode != c.status || !answers[0].Close ||
			answers[0].Header.Get("Content-Type") != "application/json" || !strings.Contains(bodies[0], c.shape) {
			t.Errorf("%s: want one %d with %s, got %d answers %v %q", c.name, c.status, c.shape, len(answers), answers, bodies)
		}
	}

	// On a kept-alive connection the family is the failed request's, not the
	// one's before it.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	io.WriteString(conn, "GET /v1/router/beta/v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	io.WriteString(conn, "POST /alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nbroken\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), `"type":"error"`) {
		t.Fatalf("second request: %d %s", resp.StatusCode, b)
	}
}

// A head whose empty line is a bare LF, or follows a line ending in one, is
// refused at once with 400 in the family's shape, whatever comes after it;
// fasthttp alone would wait for a CRLF CRLF until its read timeout, or serve
// it only when one came later. A head with bare LFs that ends in CRLF CRLF is
// served, and so is a body with bare LFs after a 100 Continue.
func TestBareLFHeadRefused(t *testing.T) {
	var calls atomic.Int64
	addr := rawUpstreamGateway(t, countedChat(&calls))
	body := `{"model":"m","messages":[]}`
	chat := "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n"
	models := "GET /v1/router/beta/v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n\r\n"
	for _, c := range []struct{ name, raw, shape string }{
		{"bare lf throughout", "POST /v1/router/alpha/v1/messages HTTP/1.1\nHost: gw\nx-api-key: key-1\n\n", `"type":"error"`},
		{"bare empty line", chat + "\n" + body, `"type":"invalid_request_error"`},
		{"crlf empty line after a bare lf", strings.TrimSuffix(chat, "\r\n") + "\n\r\n" + body, `"type":"invalid_request_error"`},
		{"bare end, then a request", chat + "\n" + body + models, `"type":"invalid_request_error"`},
		{"gamma", "GET /gamma/v1beta/models HTTP/1.1\nHost: gw\nx-goog-api-key: key-1\n\n", `"status":"INVALID_ARGUMENT"`},
	} {
		answers, bodies := exchange(t, addr, c.raw)
		if len(answers) != 1 || answers[0].StatusCode != 400 || !answers[0].Close ||
			!strings.Contains(bodies[0], c.shape) || !strings.Contains(bodies[0], "CRLF CRLF") {
			t.Errorf("%s: want one 400 in the family's shape and the connection closed, got %d answers %q", c.name, len(answers), bodies)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}

	// The head's end in a write of its own: refused the same, whether the
	// server reads it apart or not.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, "GET /v1/router/beta/v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n")
	time.Sleep(10 * time.Millisecond) // not needed for the outcome; makes two reads likely
	io.WriteString(conn, "\n")
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 400 {
		t.Fatalf("head ended in a second write: %v %v", resp, err)
	}

	// Bare LFs inside a head that ends in CRLF CRLF are read as line ends.
	answers, bodies := exchange(t, addr, "GET /v1/router/beta/v1/models HTTP/1.1\nHost: gw\nAuthorization: Bearer key-1\nConnection: close\r\n\r\n")
	if len(answers) != 1 || answers[0].StatusCode != 200 {
		t.Fatalf("bare LFs inside: %d answers %q", len(answers), bodies)
	}

	// A body sent after a 100 Continue is no head, bare LFs and all.
	big := `{"model":"m",` + strings.Repeat("\n\n", 10<<10) + `"messages":[]}`
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	conn2.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn2, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n"+
		"Expect: 100-continue\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(big))+"\r\n\r\n")
	br2 := bufio.NewReader(conn2)
	line, err := br2.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	br2.ReadString('\n')
	for i := 0; i < len(big); i += 1000 { // in pieces, as a client may send it
		io.WriteString(conn2, big[i:min(i+1000, len(big))])
	}
	if resp, err := http.ReadResponse(br2, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("body after 100 Continue: %v %v", resp, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the upstream was called %d times, want 1", n)
	}
}

// A chunked body's framing is bounded: a chunk size line that never ends
// (fasthttp bounds neither the line nor its extensions, and neither counts as
// body) gets 413 once it passes the slack and what the body read so far
// earned, instead of being read until the read timeout. A body sent in chunks
// of one byte, six bytes on the wire a byte, is served.
func TestChunkedFramingBounded(t *testing.T) {
	var calls atomic.Int64
	addr := rawUpstreamGateway(t, countedChat(&calls), "limits: {max_body_bytes: 131072}")
	head := "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n" +
		"Transfer-Encoding: chunked\r\n\r\n"
	for _, line := range []string{"5;", "5"} { // an endless extension; endless whitespace
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		fill := strings.Repeat(map[bool]string{true: "a", false: " "}[line == "5;"], 64<<10)
		go func() {
			io.WriteString(conn, head+line)
			for range 16 { // 1 MiB, more than the slack; then the client waits
				if _, err := io.WriteString(conn, fill); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || !strings.Contains(string(b), `"type":"invalid_request_error"`) ||
			!strings.Contains(string(b), "size lines and extensions") {
			t.Fatalf("%q: %d %s", line, resp.StatusCode, b)
		}
		conn.Close()
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}

	// The whole body limit in chunks of one byte: 768 KiB on the wire.
	body := `{"model":"m","messages":[],"user":"` + strings.Repeat("u", 128<<10-40) + `"}`
	var chunked strings.Builder
	for i := 0; i < len(body); i++ {
		chunked.WriteString("1\r\n" + body[i:i+1] + "\r\n")
	}
	chunked.WriteString("0\r\n\r\n")
	answers, bodies := exchange(t, addr, strings.Replace(head, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)+chunked.String())
	if len(answers) != 1 || answers[0].StatusCode != 200 {
		t.Fatalf("tiny chunks: %d answers %q", len(answers), bodies)
	}
}
