package upstream

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// answerHeads are the heads of a chat answer as each provider sends it (the
// simulator's, see bench/sim's providerHeaders), by family.
var answerHeads = map[string]string{
	"beta": "HTTP/1.1 200 OK\r\nDate: Wed, 25 Nov 2026 14:22:06 GMT\r\nContent-Type: application/json\r\n" +
		"Content-Length: 1008\r\nConnection: keep-alive\r\naccess-control-expose-headers: X-Request-ID\r\n" +
		"openai-organization: user-simulated0000000000000\r\nopenai-processing-ms: 312\r\n" +
		"openai-project: proj_simulated00000000000000\r\nopenai-version: 2020-10-01\r\n" +
		"x-envoy-upstream-service-time: 318\r\nx-ratelimit-limit-requests: 10000\r\n" +
		"x-ratelimit-limit-tokens: 30000000\r\nx-ratelimit-remaining-requests: 9999\r\n" +
		"x-ratelimit-remaining-tokens: 29999977\r\nx-ratelimit-reset-requests: 6ms\r\n" +
		"x-ratelimit-reset-tokens: 0s\r\nx-request-id: req_e85ab3c5715d962c6da5858258308cce\r\n" +
		"strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n" +
		"cf-cache-status: DYNAMIC\r\nx-content-type-options: nosniff\r\nServer: cloudflare\r\n" +
		"cf-ray: 6da5858258308cce-SJC\r\nalt-svc: h3=\":443\"; ma=86400\r\n\r\n",
	"alpha": "HTTP/1.1 200 OK\r\nDate: Wed, 25 Nov 2026 14:22:06 GMT\r\nContent-Type: application/json\r\n" +
		"Content-Length: 772\r\nConnection: keep-alive\r\nanthropic-ratelimit-requests-limit: 4000\r\n" +
		"anthropic-ratelimit-requests-remaining: 3999\r\nanthropic-ratelimit-requests-reset: 2026-11-25T14:22:07Z\r\n" +
		"anthropic-ratelimit-input-tokens-limit: 2000000\r\nanthropic-ratelimit-input-tokens-remaining: 1999000\r\n" +
		"anthropic-ratelimit-input-tokens-reset: 2026-11-25T14:22:07Z\r\nanthropic-ratelimit-output-tokens-limit: 400000\r\n" +
		"anthropic-ratelimit-output-tokens-remaining: 400000\r\nanthropic-ratelimit-output-tokens-reset: 2026-11-25T14:22:07Z\r\n" +
		"anthropic-ratelimit-tokens-limit: 2400000\r\nanthropic-ratelimit-tokens-remaining: 2399000\r\n" +
		"anthropic-ratelimit-tokens-reset: 2026-11-25T14:22:07Z\r\nrequest-id: req_8ef6874abdc5ac43ea134afe\r\n" +
		"strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n" +
		"anthropic-organization-id: 5b7a5b6e-7c1d-4a4e-9a43-0c2f6e1d3a55\r\nvia: 1.1 google\r\n" +
		"cf-cache-status: DYNAMIC\r\nx-robots-tag: none\r\nServer: cloudflare\r\ncf-ray: bdc5ac43ea134afe-SJC\r\n\r\n",
}

// BenchmarkAnswerHead reads an answer's head as the transport does and
// copies it to the client's response as Begin does ("/begin"), or as
// BeginLines does ("/lines"), and writes the client's head.
func BenchmarkAnswerHead(b *testing.B) {
	for _, name := range []string{"beta/begin", "beta/lines", "alpha/begin", "alpha/lines"} {
		fam, mode, _ := strings.Cut(name, "/")
		b.Run(name, func(b *testing.B) {
			head := []byte(answerHeads[fam])
			var lines, written []byte
			mark := []byte(string(testMark[0]) + ": " + string(testMark[1]) + "\r\n")
			d := unreachableDeployment(fam, config.Health{})
			var r Relay
			var out fasthttp.Response
			rd := bytes.NewReader(head)
			br := bufio.NewReaderSize(rd, 4096)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset()
				r.dep = d
				out.Reset()
				rd.Reset(head)
				br.Reset(rd)
				if _, err := wire.ReadHead(br, false, &r.resp, &r.head); err != nil {
					b.Fatal(err)
				}
				if mode == "begin" {
					r.Begin(&out)
					written = append(written[:0], out.Header.Header()...)
					continue
				}
				_, lines, _ = r.BeginLines(&out, lines[:0], testMark[0], testMark[1])
				// as the client's connection puts the lines in the mark's place
				h := out.Header.Header()
				at := bytes.Index(h, mark)
				written = append(append(append(written[:0], h[:at]...), lines...), h[at+len(mark):]...)
			}
		})
	}
}
