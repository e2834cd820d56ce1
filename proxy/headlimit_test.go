package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/store"
)

// A request head up to clientReadBuffer is read; a larger one is answered
// 431 in the family's shape, and the connection closes.
func TestRequestHeadLimit(t *testing.T) {
	addr := rawUpstreamGateway(t, func(ctx *fasthttp.RequestCtx) {})
	const line = "GET /v1/router/beta/v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\nConnection: close\r\n"
	f := func(headLen, status int) {
		t.Helper()
		pad := headLen - len(line) - len("X-Pad: \r\n\r\n")
		raw := line + "X-Pad: " + strings.Repeat("p", pad) + "\r\n\r\n"
		if len(raw) != headLen {
			t.Fatalf("BUG: head of %d bytes, want %d", len(raw), headLen)
		}
		answers, bodies := exchange(t, addr, raw)
		if len(answers) != 1 || answers[0].StatusCode != status {
			t.Fatalf("head of %d bytes: want one %d, got %d answers %v %q", headLen, status, len(answers), answers, bodies)
		}
		if status == 431 && (!answers[0].Close || !strings.Contains(bodies[0], `"type":"invalid_request_error"`)) {
			t.Fatalf("head of %d bytes: want a closing 431 in beta's shape, got %v %q", headLen, answers[0], bodies[0])
		}
	}
	f(1<<10, 200)
	f(clientReadBuffer-64, 200)
	f(clientReadBuffer+512, 431)
}

// The head of an alpha file listing by the most ids the interface allows,
// percent-encoded as an SDK may send them, fits the read buffer with a
// kilobyte and a half of headers beside it.
func TestHundredIDsListHeadFits(t *testing.T) {
	var line strings.Builder
	line.WriteString("GET /alpha/some-group/v1/files?")
	for i := range 100 {
		if i > 0 {
			line.WriteByte('&')
		}
		line.WriteString("ids%5B%5D=" + store.NewFileID(time.Now()))
	}
	line.WriteString(" HTTP/1.1\r\n")
	if n := line.Len() + 1536; n > clientReadBuffer {
		t.Fatalf("a listing of 100 ids takes a %d-byte head, more than the %d-byte read buffer", n, clientReadBuffer)
	}
}
