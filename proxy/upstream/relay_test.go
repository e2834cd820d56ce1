package upstream

import (
	"io"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// pipeUpstream returns a deployment's client whose connections are each
// answered, after a request is read whole, with the next of answers
// (wiretest.Answers); a connection then stays open until the test ends.
// dials counts the connections made.
func pipeUpstream(t *testing.T, dials *int, answers ...string) *fasthttp.HostClient {
	t.Helper()
	return pipeClient(wiretest.Answers(t, answers...), func(c net.Conn) net.Conn {
		*dials++
		return c
	})
}

// pipeClient returns a deployment's client (wire.NewClient, without
// timeouts) whose connections are each a wiretest.Pipe answering with
// answer: wrap makes the connection the wire is given of the client's end.
func pipeClient(answer func() (string, bool), wrap func(net.Conn) net.Conn) *fasthttp.HostClient {
	dial := func(string) (net.Conn, error) { return wrap(wiretest.Pipe(answer)), nil }
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
	client := pipeUpstream(t, &dials, wiretest.SSEHead+wiretest.SSEChunks)
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
