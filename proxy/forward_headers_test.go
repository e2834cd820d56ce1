package proxy

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream"
)

// fasthttpHead is how the upstream request was built before appendHead: a
// fasthttp.Request given a copy of the client's headers less the stripped
// ones and those its Connection headers name, the deployment's URL and
// credentials, the request id and the body, then serialised by fasthttp. fasthttp's one addition of its own, a default
// Content-Type, is off: the gateway sends the client's or none.
func fasthttpHead(client *fasthttp.Request, fam family.Family, path string, query []byte, body string) string {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	client.Header.CopyTo(&req.Header)
	dropConnectionNamed(&req.Header)
	req.Header.DisableNormalizing()
	for _, h := range strippedRequestHeaders {
		req.Header.DelBytes(h)
	}
	// The client's anthropic-versions but empty ones; an alpha deployment's
	// default when none is left.
	var versions [][]byte
	for _, v := range req.Header.PeekAll("Anthropic-Version") {
		if len(v) > 0 {
			versions = append(versions, bytes.Clone(v))
		}
	}
	req.Header.Del("Anthropic-Version")
	for _, v := range versions {
		req.Header.AddBytesV("Anthropic-Version", v)
	}
	req.Header.SetNoDefaultContentType(true)
	req.URI().SetScheme("http")
	req.URI().SetHost("upstream:9")
	req.URI().SetPath("/base" + path)
	req.URI().SetQueryStringBytes(query)
	switch fam {
	case family.Alpha:
		req.Header.Set("X-Api-Key", "deployment")
		if len(versions) == 0 {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
	case family.Beta:
		req.Header.Set("Authorization", "Bearer deployment")
	case family.Gamma:
		req.Header.Set("X-Goog-Api-Key", "deployment")
	}
	req.Header.Set("X-Request-Id", "rid")
	req.SetBodyString(body)
	req.URI().DisablePathNormalizing = true
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := req.Write(w); err != nil {
		panic(err)
	}
	w.Flush()
	return out.String()
}

// dropConnectionNamed deletes from h the headers that its Connection headers
// name, when they name any but close and keep-alive.
func dropConnectionNamed(h *fasthttp.RequestHeader) {
	var named []string
	for k, v := range h.All() { // PeekAll would hide the others behind a "close"
		if string(k) != "Connection" {
			continue
		}
		for _, opt := range strings.Split(string(v), ",") {
			named = append(named, strings.Trim(opt, " \t"))
		}
	}
	if !slices.ContainsFunc(named, func(opt string) bool {
		return opt != "" && !strings.EqualFold(opt, "close") && !strings.EqualFold(opt, "keep-alive")
	}) {
		return
	}
	for _, opt := range named {
		if opt != "" {
			h.Del(opt)
		}
	}
}

// The head written line by line carries what fasthttp built and serialised
// from the same request, byte for byte: request line, repeats, special
// headers (Content-Type, User-Agent), credentials of each family (the
// client's anthropic-version kept), and none of the stripped ones, whatever
// their case; the query only where the endpoint forwards it. Only the order
// of the lines differs.
func TestUpstreamHeadAsFasthttpBuiltIt(t *testing.T) {
	for _, c := range []struct {
		fam  family.Family
		ep   endpoint
		path string
		head string
	}{
		{family.Beta, epChat, "/v1/chat/completions",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"},
		{family.Alpha, epMessages, "/v1/messages",
			"POST /v1/messages HTTP/1.1\r\nhost: gw:8080\r\nuser-agent: sdk/1\r\nx-api-key: k\r\nanthropic-version: 2023-06-01\r\n" +
				"anthropic-beta: a\r\nanthropic-beta: b\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\ncookie: a=b; c=d\r\n" +
				"accept-encoding: gzip\r\nx-session-id: s\r\nx-request-id: r\r\nte: trailers\r\nexpect: 100-continue\r\ncontent-type: application/json\r\n"},
		{family.Alpha, epMessages, "/v1/messages",
			"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: k\r\nContent-Type: application/json\r\n"},
		{family.Gamma, epGenerateContent, "/v1beta/models/g:generateContent",
			"POST /v1beta/models/g:generateContent?alt=sse HTTP/1.1\r\nHost: gw\r\nX-Goog-Api-Key: k\r\nX-Gamma-Api-Key: k\r\n" +
				"Proxy-Authorization: p\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nTrailer: x\r\nAlpha-Workspace-Id: w\r\nRequest-Id: q\r\n" +
				"Idempotency-Key: i\r\nX-Custom: 1\r\nAccept: */*\r\n"},
		{family.Beta, epResponsesGet, "/v1/responses/resp_1",
			"GET /v1/responses/resp_1?include[]=x&stream=true HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nOpenAI-Beta: x\r\n"},
		{family.Beta, epResponsesDelete, "/v1/responses/resp_1",
			"DELETE /v1/responses/resp_1?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\n"},
		{family.Alpha, epMessages, "/v1/messages",
			"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nX-Api-Key: k\r\nConnection: keep-alive, x-hop,Anthropic-Version\r\n" +
				"X-Hop: 1\r\nX-Kept: 2\r\nAnthropic-Version: 2024-01-01\r\nConnection:\tX-Other \r\nX-Other: 3\r\nContent-Type: application/json\r\n"},
	} {
		head, body := c.head, ""
		if strings.HasPrefix(head, "POST") {
			body = `{"model":"m"}`
			head += "Content-Length: 13\r\n"
		}
		var ctx fasthttp.RequestCtx // its body, after an Expect, is not read: body is the body
		if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(head + "\r\n" + body))); err != nil {
			t.Fatal(err)
		}
		dep := upstream.New(config.Upstream{Name: "d", Family: c.fam.String(), BaseURL: "http://upstream:9/base", APIKey: "deployment", MaxConns: 1},
			config.Timeouts{}, config.Health{}, config.Limits{})
		call := &call{ctx: &ctx, ep: c.ep, reqID: []byte("rid")}
		var query []byte
		if call.forwardQuery() {
			query = ctx.URI().QueryString()
		}
		got := string(call.appendHead(nil, dep, c.path, len(body))) + body
		want := fasthttpHead(&ctx.Request, c.fam, c.path, query, body)
		if sortedLines(got) != sortedLines(want) {
			t.Errorf("upstream request differs:\n got %q\nwant %q", got, want)
		}
		for _, h := range strippedRequestHeaders {
			if name := "\r\n" + strings.ToLower(string(h)) + ":"; strings.Contains(strings.ToLower(got), name) &&
				string(h) != "Content-Length" && string(h) != "X-Api-Key" && string(h) != "X-Goog-Api-Key" &&
				string(h) != "Authorization" && string(h) != "X-Request-Id" && string(h) != "Host" {
				t.Errorf("%s reached the upstream:\n%s", h, got)
			}
		}
		for _, client := range []string{"Bearer k", "x-api-key: k", "X-Api-Key: k", "Api-Key: k\r"} {
			if strings.Contains(got, client) {
				t.Errorf("the client's credential %q reached the upstream:\n%s", client, got)
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

// FuzzUpstreamHead feeds any header block a client could send: whatever the
// server accepts reaches the upstream as fasthttp would have written it,
// line for line, and parses back with the same number of header lines, so
// that no value or name can add a line or end the head early.
func FuzzUpstreamHead(f *testing.F) {
	f.Add(byte(0), "Authorization: Bearer k\r\nContent-Type: application/json\r\n")
	f.Add(byte(1), "x-api-key: k\r\nanthropic-version: 2023-06-01\r\nanthropic-beta: a\r\nanthropic-beta: b\r\nhost: gw\r\n")
	f.Add(byte(2), "X-Goog-Api-Key: k\r\nTrailer: x\r\nCookie: a=b\r\nX-Custom: 1\r\nAccept: */*\r\nUser-Agent: x\r\n")
	f.Add(byte(1), "Connection: x-a, anthropic-version\r\nX-A: 1\r\nanthropic-version: 2024-01-01\r\nConnection: close\r\n")
	f.Add(byte(1), "Anthropic-Version: 2024-01-01\r\nX-Api-Key: a\r\nAuthorization: Bearer b\r\nX-Odd:  spaced value \r\n")
	f.Fuzz(func(t *testing.T, which byte, headers string) {
		fam := []family.Family{family.Beta, family.Alpha, family.Gamma}[int(which)%3]
		const body = `{"model":"m"}`
		raw := "POST /v1/x HTTP/1.1\r\nHost: gw\r\n" + headers + "Content-Length: 13\r\n\r\n" + body
		var ctx fasthttp.RequestCtx
		if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return // the server refuses it: nothing reaches an upstream
		}
		if ctx.Request.Header.ContentLength() != len(body) {
			return // the fuzzed lines framed the body otherwise; the gateway refuses those (framing tests)
		}
		dep := upstream.New(config.Upstream{Name: "d", Family: fam.String(), BaseURL: "http://upstream:9/base", APIKey: "deployment", MaxConns: 1},
			config.Timeouts{}, config.Health{}, config.Limits{})
		c := &call{ctx: &ctx, ep: epChat, reqID: []byte("rid")}
		head := string(c.appendHead(nil, dep, "/v1/x", len(body)))
		want := fasthttpHead(&ctx.Request, fam, "/v1/x", nil, body)
		if sortedLines(head+body) != sortedLines(want) {
			t.Fatalf("upstream request differs:\n got %q\nwant %q", head+body, want)
		}
		var up fasthttp.Request
		if err := up.Read(bufio.NewReader(strings.NewReader(head + body))); err != nil {
			t.Fatalf("the upstream cannot read %q: %v", head, err)
		}
		lines := strings.Count(head, "\r\n") - 2 // less the request line and the blank line
		if n := up.Header.Len(); n != lines {
			t.Fatalf("the upstream reads %d headers of %d lines in %q", n, lines, head)
		}
	})
}
