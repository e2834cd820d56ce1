package upstream

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

const (
	sseHead   = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	sseChunks = "9\r\ndata: a\n\n\r\n9;x=1\r\ndata: b\n\n\r\n0\r\nX-T: 1\r\n\r\n"
)

// framed feeds answer to a fresh framing in pieces of at most step bytes.
func framed(answer string, step int) *framing {
	var f framing
	for p := []byte(answer); len(p) > 0; {
		n := min(step, len(p))
		f.feed(p[:n])
		p = p[n:]
	}
	return &f
}

// Wherever the reads of the connection cut the answer, the framing ends the
// same: two chunks of 9 data bytes passed whole, and the final one.
func TestFramingAnySplit(t *testing.T) {
	answer := "HTTP/1.1 100 Continue\r\n\r\n" + sseHead + sseChunks
	for step := 1; step <= len(answer); step++ {
		f := framed(answer, step)
		if f.bad || f.data != 18 || f.whole != 18 || f.state != chunkDone || f.body != int64(len(sseChunks)) {
			t.Fatalf("step %d: %+v", step, *f)
		}
		if !f.ready(true, 0) || !f.ready(true, 17) || f.ready(true, 18) || !f.ended(18) || f.ended(9) {
			t.Fatalf("step %d: ready/ended wrong: %+v", step, *f)
		}
	}
}

// What a read of the body would wait for is never called ready.
func TestFramingReady(t *testing.T) {
	for _, tc := range []struct {
		passed  string
		read    int64
		ready   bool
		ended   bool
		chunked bool
	}{
		{sseHead[:20], 0, false, false, true},                 // still in the header
		{sseHead, 0, false, false, true},                      // no body byte yet
		{sseHead + "9\r\n", 0, false, false, true},            // a size line alone
		{sseHead + "9\r\ndata", 0, true, false, true},         // part of the data: read returns it
		{sseHead + "9\r\ndata", 4, false, false, true},        // all of it was read
		{sseHead + "9\r\ndata: a\n\n", 0, false, false, true}, // the read would wait for the CRLF
		{sseHead + "9\r\ndata: a\n\n\r", 0, false, false, true},
		{sseHead + "9\r\ndata: a\n\n\r\n", 0, true, false, true},
		{sseHead + "9\r\ndata: a\n\n\r\n", 9, false, false, true},
		{sseHead + "9\r\ndata: a\n\n\r\n0\r\n\r", 9, false, false, true},
		{sseHead + "9\r\ndata: a\n\n\r\n0\r\n\r\n", 9, false, true, true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{\"a\"", 0, true, false, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{\"a\"", 4, false, false, false},
	} {
		f := framed(tc.passed, len(tc.passed))
		if got := f.ready(tc.chunked, tc.read); got != tc.ready {
			t.Errorf("%q read %d: ready %v, want %v", tc.passed, tc.read, got, tc.ready)
		}
		if got := tc.chunked && f.ended(tc.read); got != tc.ended {
			t.Errorf("%q read %d: ended %v, want %v", tc.passed, tc.read, got, tc.ended)
		}
	}
}

// A body that is not chunked stops the chunk following at once or within
// maxSizeLine bytes, whatever its length, and is then never ready as chunked.
func TestFramingNotChunked(t *testing.T) {
	body := "{\"id\":\"x\",\"text\":\"" + string(make([]byte, 4096)) + "\"}"
	f := framed("HTTP/1.1 200 OK\r\nContent-Length: 4116\r\n\r\n"+body, 1000)
	if !f.bad || f.ready(true, 0) || !f.ready(false, 0) || f.ready(false, int64(len(body))) {
		t.Fatalf("%+v", *f)
	}
}

// pipeUpstream returns a client whose one connection, a deadlineConn as the
// dialer makes, is answered after its request is read whole with answer in
// one write; the connection then stays open until the test ends.
func pipeUpstream(t *testing.T, answer string) *fasthttp.HostClient {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	dial := func(string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			var req fasthttp.Request
			if err := req.Read(bufio.NewReader(server)); err != nil {
				return
			}
			io.WriteString(server, answer)
			<-done
		}()
		dc := &deadlineConn{Conn: client}
		dc.local = connAddr{Addr: client.LocalAddr(), conn: dc}
		return dc, nil
	}
	return &fasthttp.HostClient{Addr: "upstream", Dial: dial, StreamResponseBody: true}
}

// Through fasthttp's own client and buffer: the relay is told a chunk is
// ready exactly while its read would not wait. The answer arrives in one
// write, so fasthttp's first read holds it whole.
func TestFramingUnderFasthttp(t *testing.T) {
	client := pipeUpstream(t, sseHead+sseChunks)
	var r Relay
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI("http://upstream/")
	if err := client.Do(req, &r.resp); err != nil {
		t.Fatal(err)
	}
	var out fasthttp.Response
	r.dep = &Deployment{}
	r.dep.inflight.Add(1)
	r.Stream(&out, 0, false, nil)
	defer r.Close()
	if r.conn == nil || !r.chunked || !r.upstreamReady() || out.ImmediateHeaderFlush {
		t.Fatalf("conn %v chunked %v ready %v immediate %v", r.conn != nil, r.chunked, r.upstreamReady(), out.ImmediateHeaderFlush)
	}
	buf := make([]byte, 4)
	if n, _ := r.Read(buf); n != 4 || !r.upstreamReady() {
		t.Fatalf("after a 4-byte read: n %d ready %v", n, r.upstreamReady())
	}
	r.Read(make([]byte, 64)) // the rest of the first chunk
	if !r.upstreamReady() || r.upstreamEnded() {
		t.Fatal("the second chunk is here, yet not ready")
	}
	if n, _ := r.Read(make([]byte, 64)); n != 9 || r.upstreamReady() || !r.upstreamEnded() {
		t.Fatalf("only the final chunk is left: n %d ready %v ended %v", n, r.upstreamReady(), r.upstreamEnded())
	}
}

// BenchmarkFramingFeed is the framing's cost for a chat answer's header and
// a short SSE body: what every upstream answer pays for upstreamReady.
func BenchmarkFramingFeed(b *testing.B) {
	ev := "data: {\"choices\":[{\"delta\":{\"content\":\"hello there\"}}]}\n\n"
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nDate: Tue, 24 Nov 2026 20:00:00 GMT\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n", len(ev), ev))
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	var f framing
	for b.Loop() {
		f.reset()
		f.feed(answer)
	}
	if f.state != chunkDone {
		b.Fatalf("%+v", f)
	}
}
