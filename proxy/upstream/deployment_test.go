package upstream

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/valyala/fasthttp"
)

// Target gives the upstream request the deployment's host and base path and
// the endpoint's path, whatever URL the pooled request held before; the query
// is the caller's to add. A deployment over TLS keeps the http scheme: its
// dialer speaks TLS, and the client refuses a scheme other than its own.
func TestTarget(t *testing.T) {
	for _, c := range []struct{ base, wantLine, wantHost string }{
		{"http://127.0.0.1:8081/openai/v1/", "POST /openai/v1/chat/completions?api-version=1 HTTP/1.1", "127.0.0.1:8081"},
		{"https://Api.Example.com", "POST /chat/completions?api-version=1 HTTP/1.1", "api.example.com"},
	} {
		d := New(config.Upstream{Name: "d", Family: "beta", BaseURL: c.base, APIKey: "k", MaxConns: 1},
			config.Timeouts{}, config.Health{}, config.Limits{})
		req := fasthttp.AcquireRequest()
		req.SetRequestURI("https://elsewhere:1/old/path?old=1") // what a pooled request may hold
		req.Reset()
		req.Header.SetMethod("POST")
		scratch := d.Target(req, nil, "/chat/completions")
		req.URI().SetQueryString("api-version=1")
		if string(req.URI().Scheme()) != "http" {
			t.Errorf("%s: the request's scheme is https", c.base)
		}
		req.URI().DisablePathNormalizing = true // as the client sets it before writing
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		if err := req.Write(w); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		head, _, _ := strings.Cut(out.String(), "\r\n\r\n")
		lines := strings.Split(head, "\r\n")
		if lines[0] != c.wantLine {
			t.Errorf("%s: request line %q, want %q", c.base, lines[0], c.wantLine)
		}
		if !strings.Contains(head, "\r\nHost: "+c.wantHost+"\r\n") {
			t.Errorf("%s: head %q has no Host %s", c.base, head, c.wantHost)
		}
		if want, _, _ := strings.Cut(strings.Fields(c.wantLine)[1], "?"); string(scratch) != want {
			t.Errorf("%s: returned path %q", c.base, scratch)
		}
		fasthttp.ReleaseRequest(req)
	}
}
