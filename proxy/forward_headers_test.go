package proxy

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// copyThenStrip is how the upstream request's headers were built before
// appendForwardedHeaders: a copy of the client's, then a deletion per
// stripped name. The upstream must see the same bytes either way.
func copyThenStrip(dst, src *fasthttp.RequestHeader) {
	src.CopyTo(dst)
	dst.DisableNormalizing()
	for _, h := range strippedRequestHeaders {
		dst.DelBytes(h)
	}
}

// The one-pass header filter forwards byte for byte the lines that copying
// then deleting did: request line, repeats, special headers (Host,
// Content-Type, User-Agent), and none of the stripped ones, whatever their
// case. Only their order differs: a deletion moved the last header into the
// deleted one's place, where now the client's order is kept.
func TestForwardedHeadersAsBefore(t *testing.T) {
	for _, head := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n",
		"POST /v1/messages HTTP/1.1\r\nhost: gw:8080\r\nuser-agent: sdk/1\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\n" +
			"anthropic-beta: a\r\nanthropic-beta: b\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\ncookie: a=b; c=d\r\n" +
			"accept-encoding: gzip\r\nx-session-id: s\r\nx-request-id: r\r\nte: trailers\r\nexpect: 100-continue\r\ncontent-type: application/json\r\n",
		"POST /v1beta/models/g:generateContent?alt=sse HTTP/1.1\r\nHost: gw\r\nX-Goog-Api-Key: k\r\nX-Gamma-Api-Key: k\r\n" +
			"Proxy-Authorization: p\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nTrailer: x\r\nAlpha-Workspace-Id: w\r\nRequest-Id: q\r\n" +
			"Idempotency-Key: i\r\nX-Custom: 1\r\nAccept: */*\r\n",
		"GET /v1/responses/resp_1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nOpenAI-Beta: x\r\n",
	} {
		body := ""
		if strings.HasPrefix(head, "POST") {
			body = `{"model":"m"}`
			head += "Content-Length: 13\r\n"
		}
		var client fasthttp.Request
		if err := client.Read(bufio.NewReader(strings.NewReader(head + "\r\n" + body))); err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		for _, b := range []struct {
			build func(dst, src *fasthttp.RequestHeader)
			out   *bytes.Buffer
		}{{copyThenStrip, &want}, {appendForwardedHeaders, &got}} {
			build, out := b.build, b.out
			req := fasthttp.AcquireRequest()
			build(&req.Header, &client.Header)
			req.URI().SetQueryString("") // the query is forwardQuery's, not the headers'
			req.URI().SetScheme("http")
			req.URI().SetHost("upstream:9")
			req.URI().SetPath("/base/v1/x")
			req.Header.Set("X-Api-Key", "deployment")
			req.SetBodyRaw(client.Body())
			req.URI().DisablePathNormalizing = true
			w := bufio.NewWriter(out)
			if err := req.Write(w); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			fasthttp.ReleaseRequest(req)
		}
		if sortedLines(got.String()) != sortedLines(want.String()) {
			t.Errorf("upstream request differs:\n got %q\nwant %q", got.String(), want.String())
		}
		for _, h := range strippedRequestHeaders {
			if name := "\r\n" + strings.ToLower(string(h)) + ":"; strings.Contains(strings.ToLower(got.String()), name) && string(h) != "Content-Length" && string(h) != "X-Api-Key" {
				t.Errorf("%s reached the upstream:\n%s", h, got.String())
			}
		}
	}
}

// sortedLines is the request's head with its header lines sorted, and its body.
func sortedLines(req string) string {
	head, body, _ := strings.Cut(req, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\r\n") + "\r\n\r\n" + body
}
