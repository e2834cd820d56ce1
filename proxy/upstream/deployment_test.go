package upstream

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/valyala/fasthttp"
)

// A head begins with the request line to the deployment's base path and the
// endpoint's path, with the query the caller gives, and the base URL's host
// in lower case; it parses back as the request it says.
func TestAppendRequestLine(t *testing.T) {
	for _, c := range []struct{ base, wantLine, wantHost string }{
		{"http://127.0.0.1:8081/openai/v1/", "POST /openai/v1/chat/completions?api-version=1 HTTP/1.1", "127.0.0.1:8081"},
		{"https://Api.Example.com", "POST /chat/completions?api-version=1 HTTP/1.1", "api.example.com"},
	} {
		d := New(config.Upstream{Name: "d", Family: "beta", BaseURL: c.base, APIKey: "k", MaxConns: 1},
			config.Timeouts{}, config.Health{}, config.Limits{})
		head := d.AppendRequestLine(nil, []byte("POST"), "/chat/completions", []byte("api-version=1"))
		head = d.AppendCredentials(head, false)
		head = EndHead(head, []byte("POST"), 2)
		lines := strings.Split(string(head), "\r\n")
		if lines[0] != c.wantLine || lines[1] != "Host: "+c.wantHost {
			t.Errorf("%s: head begins %q, want %q and Host %s", c.base, lines[:2], c.wantLine, c.wantHost)
		}
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(bytes.NewReader(append(head, "{}"...)))); err != nil {
			t.Fatalf("%s: %q does not parse: %v", c.base, head, err)
		}
		if string(req.Header.Peek("Authorization")) != "Bearer k" || string(req.Body()) != "{}" {
			t.Errorf("%s: parsed back as %q", c.base, req.String())
		}
	}
}

// A body's length is sent but by a GET or HEAD without one.
func TestEndHead(t *testing.T) {
	for _, c := range []struct {
		method string
		n      int
		want   string
	}{
		{"GET", 0, "\r\n"},
		{"HEAD", 0, "\r\n"},
		{"GET", 3, "Content-Length: 3\r\n\r\n"},
		{"POST", 0, "Content-Length: 0\r\n\r\n"},
		{"DELETE", 0, "Content-Length: 0\r\n\r\n"},
		{"POST", 1234, "Content-Length: 1234\r\n\r\n"},
	} {
		if got := string(EndHead(nil, []byte(c.method), c.n)); got != c.want {
			t.Errorf("%s with %d bytes: %q, want %q", c.method, c.n, got, c.want)
		}
	}
}

// A call through a deployment's client tells the deployment what its
// connection saw (see observer): the time its answer's head took, for
// routing, and a pooled connection found closed while idle, in Stats.
func TestDeploymentObservesItsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req fasthttp.Request
		if req.Read(bufio.NewReader(c)) == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}()
	d := New(config.Upstream{Name: "d", Family: "beta", BaseURL: "http://" + ln.Addr().String(), APIKey: "k", MaxConns: 1},
		config.Timeouts{Connect: config.Duration(time.Minute), FirstByte: config.Duration(time.Minute)},
		config.Health{}, config.Limits{MaxResponseBytes: 1 << 20})
	if d.FirstByteEWMA() != 0 {
		t.Fatal("a time to first byte before any call")
	}
	var r Relay
	req := get("/")
	defer ReleaseRequest(req)
	if err := r.Send(d, req, false, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if d.FirstByteEWMA() <= 0 {
		t.Fatal("the answer's head did not reach the deployment's time to first byte")
	}
	(*observer)(d).IdleClosed()
	if got := d.Stats.IdleClosed(); got != 1 {
		t.Fatalf("%d connections found closed while idle, want 1", got)
	}
}
