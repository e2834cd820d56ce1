package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/upstream/wire"
)

// The client gets the upstream's headers in the upstream's order, repeated
// ones too, with the stripped ones, in any case, left out wherever they
// were: deleting them from a whole copy (fasthttp moves the last header into
// a deleted one's place) would reorder the rest. Once they are in the
// client's response, the relay no longer holds the head's lines.
func TestBeginKeepsTheUpstreamOrder(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nvary: Origin\r\nconnection: keep-alive\r\n" +
		"x-request-id: r\r\nx-dup: 1\r\nKeep-Alive: timeout=5\r\nx-a: a\r\nTransfer-Encoding: chunked\r\n" +
		"x-dup: 2\r\nSERVER: s\r\nx-b: b\r\nREQUEST-ID: q\r\nx-dup: 3\r\n\r\n"
	r, _, err := relayOf(t, []byte(head), true)
	if err != nil {
		t.Fatal(err)
	}
	var out fasthttp.Response
	out.Header.SetNoDefaultContentType(true)
	if !r.head.Read() {
		t.Fatal("the head was left to fasthttp")
	}
	r.Begin(&out)
	if r.head.Read() {
		t.Error("the relay holds the head's lines after Begin: a stream would hold them while it lasts")
	}
	var got []string
	for name, value := range out.Header.All() {
		got = append(got, string(name)+": "+string(value))
	}
	want := []string{"vary: Origin", "x-dup: 1", "x-a: a", "x-dup: 2", "x-b: b", "x-dup: 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("client headers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// unreachableDeployment is a deployment of family fam that answers nothing:
// enough for a relay to judge an answer read from elsewhere.
func unreachableDeployment(fam string, h config.Health) *Deployment {
	return New(config.Upstream{Name: "d", Family: fam, BaseURL: "http://127.0.0.1:1/v1", APIKey: "k", MaxConns: 1},
		config.Timeouts{}, h, config.Limits{})
}

// relayOf reads head as the transport does, by the fast path when fast is
// set, and returns the relay, the bytes left unread, and the error.
func relayOf(tb testing.TB, head []byte, fast bool) (*Relay, int, error) {
	tb.Helper()
	r := &Relay{dep: unreachableDeployment("beta", config.Health{})}
	br := bufio.NewReaderSize(bytes.NewReader(head), 4096)
	var h *wire.Head
	if fast {
		h = &r.head
	}
	_, err := wire.ReadHead(br, false, &r.resp, h)
	return r, br.Buffered(), err
}

// clientHeadOf is the head Begin gives the client for r's answer, its Date
// line left out (fasthttp's clock), as the gateway's server prepares a
// response, and what the relay reads of the answer's header.
func clientHeadOf(r *Relay) string {
	retryAfter := r.answerHeader("Retry-After") // before Begin, which gives the head's lines back
	var out fasthttp.Response
	out.Header.SetNoDefaultContentType(true)
	r.Begin(&out)
	return clientHead(r, &out, retryAfter)
}

// testMark stands for the client connection's mark in clientHeadOfLines.
var testMark = [2][]byte{[]byte("x-mark-5f3a"), []byte("1")}

// clientHeadOfLines is clientHeadOf through BeginLines: the lines it appends
// are put in the place of the mark's line, as the client's connection does.
func clientHeadOfLines(t *testing.T, r *Relay) string {
	t.Helper()
	retryAfter := r.answerHeader("Retry-After")
	var out fasthttp.Response
	out.Header.SetNoDefaultContentType(true)
	lines, ok := []byte("earlier bytes"), false
	var status int
	status, lines, ok = r.BeginLines(&out, lines, testMark[0], testMark[1])
	if status != r.resp.StatusCode() {
		t.Fatalf("BeginLines returned status %d of an answer of %d", status, r.resp.StatusCode())
	}
	lines, found := bytes.CutPrefix(lines, []byte("earlier bytes"))
	if !found {
		t.Fatalf("BeginLines did not append to lines: %q", lines)
	}
	setAfterBegin(r, &out)
	head := out.Header.Header()
	mark := string(testMark[0]) + ": " + string(testMark[1]) + "\r\n"
	switch n := strings.Count(string(head), mark); {
	case ok && n != 1, !ok && n != 0:
		t.Fatalf("BeginLines: ok %v, the mark %d times in %q", ok, n, head)
	case !ok && len(lines) > 0:
		t.Fatalf("BeginLines: not ok, lines %q", lines)
	}
	spliced := strings.Replace(string(head), mark, string(lines), 1)
	return clientHeadText(spliced, r, retryAfter)
}

// clientHead is the head of out, with what the gateway sets after the
// answer's headers (see setAfterBegin), and what the relay reads of r's answer.
func clientHead(r *Relay, out *fasthttp.Response, retryAfter []byte) string {
	setAfterBegin(r, out)
	return clientHeadText(string(out.Header.Header()), r, retryAfter)
}

// setAfterBegin sets on out what the gateway sets once the answer began: its
// request id, and on an SSE stream what Stream sets.
func setAfterBegin(r *Relay, out *fasthttp.Response) {
	out.Header.SetBytesV("X-Request-Id", []byte("req-1"))
	r.setStreamHeaders(out)
}

func clientHeadText(head string, r *Relay, retryAfter []byte) string {
	var b strings.Builder
	for line := range strings.SplitSeq(head, "\r\n") {
		if !strings.HasPrefix(line, "Date: ") {
			b.WriteString(line + "\r\n")
		}
	}
	fmt.Fprintf(&b, "status %d, length %d, close %v, type %q, retry-after %q", r.resp.StatusCode(), r.resp.Header.ContentLength(),
		r.resp.ConnectionClose(), r.resp.Header.ContentType(), retryAfter)
	return b.String()
}

// sameAsFasthttp fails unless the transport's own read of head agrees with
// fasthttp's parser: a head it takes, fasthttp takes too, with the same
// status, framing, content type and Connection: close, the same bytes read,
// and the same head for the client; a head it leaves goes to fasthttp
// whole, which reads it as it would alone.
func sameAsFasthttp(t *testing.T, head []byte) (read bool) {
	t.Helper()
	fast, fastLeft, fastErr := relayOf(t, head, true)
	slow, slowLeft, slowErr := relayOf(t, head, false)
	read = fast.head.Read()
	switch {
	case read && slowErr != nil:
		t.Fatalf("head %q: read, where fasthttp fails with %v", head, slowErr)
	case fmt.Sprint(fastErr) != fmt.Sprint(slowErr):
		t.Fatalf("head %q: error %v, fasthttp's %v", head, fastErr, slowErr)
	case fastErr != nil:
		return false
	case fastLeft != slowLeft:
		t.Fatalf("head %q: %d bytes left unread, fasthttp leaves %d", head, fastLeft, slowLeft)
	}
	want := clientHeadOf(slow)
	if got := clientHeadOf(fast); got != want {
		t.Fatalf("head %q:\ngot  %q\nwant %q", head, got, want)
	}
	// Through BeginLines, from either reader's relay, the client gets the same head.
	for _, fast := range []bool{true, false} {
		r, _, _ := relayOf(t, head, fast)
		if got := clientHeadOfLines(t, r); got != want {
			t.Fatalf("head %q, by BeginLines (transport's read %v):\ngot  %q\nwant %q", head, fast, got, want)
		}
	}
	return read
}

// The transport's own read of plainly framed heads agrees with fasthttp's:
// the providers' heads are read by it, as is a final head after 1xx ones
// fasthttp read, and the heads it leaves (204, HTTP/1.0, folded or bare-LF
// lines, both or neither framing header, a Trailer, a head not all here)
// are left whole to fasthttp.
func TestAnswerHeadAsFasthttp(t *testing.T) {
	for _, head := range answerHeadSeeds {
		sameAsFasthttp(t, []byte(head))
	}
	for fam, head := range answerHeads {
		if r, _, _ := relayOf(t, []byte(head), true); !r.head.Read() {
			t.Errorf("the %s provider's head is left to fasthttp", fam)
		}
	}
	for _, head := range answerHeadSeeds[len(answerHeadSeeds)-8:] {
		if r, _, _ := relayOf(t, []byte(head), true); r.head.Read() {
			t.Errorf("head %q: read, not left to fasthttp", head)
		}
	}
}

var answerHeadSeeds = []string{
	answerHeads["beta"] + "{}",
	answerHeads["alpha"],
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\ncontent-type: text/event-stream\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nRetry-After:\t30\r\nContent-Length: 0\r\nConnection: keep-alive, x-a\r\nx-a: 1\r\nx-b: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nContent-Encoding: gzip\r\nServer: s\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nx-dup: 1\r\nX-Dup: 2\r\nContent-Length: 0007\r\nx-obs: caf\xc3\xa9\r\n\r\n",
	"HTTP/1.1 599 Whatever\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nConnection: close\r\nContent-Type: text/x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	// left to fasthttp, the last eight: what wire.ReadPlainHead does not read
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nx-a: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTrailer: x-t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-t: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nx-not-all: here",
}

// FuzzAnswerHeadAsFasthttp holds the transport's own read of any head to
// fasthttp's (see sameAsFasthttp).
func FuzzAnswerHeadAsFasthttp(f *testing.F) {
	for _, head := range answerHeadSeeds {
		f.Add([]byte(head))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		sameAsFasthttp(t, head)
	})
}

// Heads of lines drawn from those the two readers treat apart, in any case
// and order, are read alike (see sameAsFasthttp).
func TestAnswerHeadLinesAsFasthttp(t *testing.T) {
	statuses := []string{"HTTP/1.1 200 OK", "HTTP/1.1 429 Too Many Requests", "HTTP/1.1 500", "HTTP/1.1 503 Slow Down",
		"HTTP/1.0 200 OK", "HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified", "HTTP/1.1 101 Switching Protocols",
		"HTTP/1.1 103 Early Hints", "HTTP/1.1 200 \x01"}
	framings := []string{"Content-Length: 5", "Content-Length: 0", "Transfer-Encoding: chunked", "Content-Length: 0005"}
	good := []string{
		"Connection: close", "Connection: keep-alive", "Connection: X-Opt, close", "x-opt: 1", "Keep-Alive: timeout=5",
		"Upgrade: h2c", "Te: trailers", "Server: s", "Date: Mon, 01 Jan 2024 00:00:00 GMT", "X-Request-Id: r",
		"Request-Id: q", "Content-Type: text/event-stream", "Content-Type: application/json", "Content-Encoding: br",
		"Set-Cookie: c=1", "Retry-After: 2", "x-tab:\tv", "x-sp:  v", "x-utf8: \xe2\x82\xac", "vary: Origin",
		"Cache-Control: no-store", "X-Accel-Buffering: yes", "Cache-Control: private",
	}
	bad := []string{
		"Content-Length: 5 ", "Content-Length: -1", "Content-Length: 99999999999999999999", "Transfer-Encoding: gzip, chunked",
		"Trailer: X-T", "x-empty:", "bad name: v", "x-ctl: a\x7fb", "x-nul: a\x00b", " folded", "x-trail: v ",
		"Content-Length: 5", "Transfer-Encoding: chunked",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cased := func(line string) string {
		switch rng.IntN(3) { // the case the upstream names it in
		case 1:
			return strings.ToLower(line)
		case 2:
			return strings.ToUpper(line)
		}
		return line
	}
	read := 0
	const heads = 20000
	for range heads {
		var lines []string
		if rng.IntN(4) > 0 {
			lines = append(lines, framings[rng.IntN(len(framings))])
		}
		for range rng.IntN(8) {
			lines = append(lines, good[rng.IntN(len(good))])
		}
		if rng.IntN(4) == 0 {
			lines = append(lines, bad[rng.IntN(len(bad))])
		}
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
		var b bytes.Buffer
		status := statuses[0]
		if rng.IntN(2) == 0 {
			status = statuses[rng.IntN(len(statuses))]
		}
		b.WriteString(status + "\r\n")
		for _, line := range lines {
			b.WriteString(cased(line) + "\r\n")
		}
		b.WriteString("\r\nhello")
		if sameAsFasthttp(t, b.Bytes()) {
			read++
		}
	}
	if read < heads/5 {
		t.Fatalf("only %d of %d heads were read by the transport: the comparison tests little", read, heads)
	}
	t.Logf("%d of %d heads read by the transport, the rest by fasthttp", read, heads)
}
