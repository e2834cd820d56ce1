package upstream

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire"
)

const (
	sseHead   = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	sseChunks = "9\r\ndata: a\n\n\r\n9;x=1\r\ndata: b\n\n\r\n0\r\nX-T: 1\r\n\r\n"
)

// pipeUpstream returns a deployment's client whose connections are each
// answered, after a request is read whole, with the next of answers (see
// pipeClient); a connection then stays open until the test ends. dials
// counts the connections made.
func pipeUpstream(t *testing.T, dials *int, answers ...string) *fasthttp.HostClient {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	next := make(chan string, len(answers))
	for _, a := range answers {
		next <- a
	}
	return pipeClient(func() (string, bool) {
		select {
		case a := <-next:
			return a, true
		case <-done:
			return "", false
		}
	}, func(c net.Conn) net.Conn {
		*dials++
		return c
	})
}

// pipeClient returns a deployment's client (wire.NewClient, without
// timeouts) whose connections are each a net.Pipe: wrap makes the connection
// the wire is given of the client's end, and the other end answers each
// request read whole with what answer returns, in one write ("\x00" parts it
// into several), until answer returns false.
func pipeClient(answer func() (string, bool), wrap func(net.Conn) net.Conn) *fasthttp.HostClient {
	dial := func(string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			br := bufio.NewReader(server)
			for {
				var req fasthttp.Request
				if err := req.Read(br); err != nil {
					return
				}
				a, ok := answer()
				if !ok {
					return
				}
				for _, part := range strings.Split(a, "\x00") {
					io.WriteString(server, part)
				}
			}
		}()
		return wrap(client), nil
	}
	return wire.NewClient("upstream", wire.Options{Dial: dial})
}

// send makes one call with client into r, streamed or not.
func send(t *testing.T, client *fasthttp.HostClient, r *Relay, stream bool) error {
	t.Helper()
	req := get("/")
	defer ReleaseRequest(req)
	r.resp.StreamBody = stream
	return req.Do(client, &r.resp, nil, false)
}

// get returns a GET of path, as the transport is given it.
func get(path string) *Request {
	req := AcquireRequest()
	req.Head = append(req.Head, "GET "+path+" HTTP/1.1\r\nHost: upstream\r\n\r\n"...)
	return req
}

// streamed begins relaying the streamed answer in r.
func streamed(r *Relay) *fasthttp.Response {
	var out fasthttp.Response
	r.dep = &Deployment{}
	r.dep.inflight.Add(1)
	r.Stream(&out, 0, false, nil)
	return &out
}

// ownsBody reports whether r's streamed body is the gateway's own reader,
// which can tell what its next read would wait for.
func ownsBody(r *Relay) bool {
	_, ok := r.stream.(peeker)
	return ok
}

// The relay is told a chunk is ready exactly while its read would not wait.
// The answer arrives in one write, so the first read of the connection
// holds it whole.
func TestAnswerBodyReady(t *testing.T) {
	var dials int
	client := pipeUpstream(t, &dials, sseHead+sseChunks)
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	out := streamed(&r)
	defer r.Close()
	if !ownsBody(&r) || !r.upstreamReady() || out.ImmediateHeaderFlush {
		t.Fatalf("peek %v ready %v immediate %v", ownsBody(&r), r.upstreamReady(), out.ImmediateHeaderFlush)
	}
	buf := make([]byte, 4)
	if n, _ := r.Read(buf); n != 4 || !r.upstreamReady() {
		t.Fatalf("after a 4-byte read: n %d ready %v", n, r.upstreamReady())
	}
	r.Read(make([]byte, 64)) // the rest of the first chunk
	if !r.upstreamReady() {
		t.Fatal("the second chunk is here, yet not ready")
	}
	if n, _ := r.Read(make([]byte, 64)); n != 9 || r.upstreamReady() {
		t.Fatalf("the final chunk is next: n %d ready %v", n, r.upstreamReady())
	}
	if n, err := r.stream.Read(make([]byte, 64)); n != 0 || err != io.EOF {
		t.Fatalf("end: %d %v", n, err)
	}
}
