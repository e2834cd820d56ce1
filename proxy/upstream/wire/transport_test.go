package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// pipeUpstream returns a client with the gateway's transport whose
// connections are each answered, after a request is read whole, with the
// next of answers (wiretest.Answers); a connection then stays open until the
// test ends. dials counts the connections made.
func pipeUpstream(t *testing.T, dials *int, answers ...string) *fasthttp.HostClient {
	t.Helper()
	return pipeClient(wiretest.Answers(t, answers...), func(c net.Conn) *deadlineConn {
		*dials++
		return &deadlineConn{Conn: c}
	})
}

// pipeClient returns a client with the gateway's transport whose connections
// are each a wiretest.Pipe answering with answer: wrap makes the
// deadlineConn over the client's end.
func pipeClient(answer func() (string, bool), wrap func(net.Conn) *deadlineConn) *fasthttp.HostClient {
	dial := func(string) (net.Conn, error) {
		client := wiretest.Pipe(answer)
		dc := wrap(client)
		dc.local = connAddr{Addr: client.LocalAddr(), conn: dc}
		return dc, nil
	}
	return &fasthttp.HostClient{Addr: "upstream", Dial: dial, Transport: answerTransport}
}

// send makes one call with client into resp, streamed or not.
func send(t *testing.T, client *fasthttp.HostClient, resp *fasthttp.Response, stream bool) error {
	t.Helper()
	req := get("/")
	defer ReleaseRequest(req)
	resp.StreamBody = stream
	return req.Do(client, resp, nil, false)
}

// get returns a GET of path, as the transport is given it.
func get(path string) *Request {
	req := AcquireRequest()
	req.Head = append(req.Head, "GET "+path+" HTTP/1.1\r\nHost: upstream\r\n\r\n"...)
	return req
}

// A body read to its end gives its connection back to the pool; one closed
// unread closes its connection.
func TestAnswerBodyConnectionReuse(t *testing.T) {
	var dials int
	body := "data: a\n\n"
	cl := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	client := pipeUpstream(t, &dials, wiretest.SSEHead+wiretest.SSEChunks, cl, cl, cl, cl)
	want := []string{"data: a\n\ndata: b\n\n", body, body}
	for i, stream := range []bool{true, true, false} {
		var resp fasthttp.Response
		if err := send(t, client, &resp, stream); err != nil {
			t.Fatal(i, err)
		}
		if stream {
			got, err := io.ReadAll(resp.BodyStream())
			resp.CloseBodyStream()
			if err != nil || string(got) != want[i] {
				t.Fatalf("call %d: %q %v", i, got, err)
			}
		} else if string(resp.Body()) != want[i] {
			t.Fatalf("call %d: %q", i, resp.Body())
		}
	}
	if dials != 1 {
		t.Fatalf("%d connections for three calls read whole, want 1", dials)
	}
	var resp fasthttp.Response
	if err := send(t, client, &resp, true); err != nil {
		t.Fatal(err)
	}
	resp.CloseBodyStream() // unread
	if err := send(t, client, &resp, false); err != nil || dials != 2 {
		t.Fatalf("after a body closed unread: %v, %d connections, want 2", err, dials)
	}
}

// Interim 1xx answers are skipped, up to a bound; answers without a body
// leave no stream and keep their connection.
func TestTransportInterimAndEmpty(t *testing.T) {
	var dials int
	client := pipeUpstream(t, &dials,
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim+1)+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	var resp fasthttp.Response
	if err := send(t, client, &resp, true); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("after 1xx: %v %d", err, resp.StatusCode())
	}
	got, _ := io.ReadAll(resp.BodyStream())
	resp.CloseBodyStream()
	if string(got) != "ok" {
		t.Fatalf("body after 1xx: %q", got)
	}
	for _, status := range []int{204, 200} {
		resp.Reset()
		if err := send(t, client, &resp, true); err != nil || resp.StatusCode() != status || resp.BodyStream() != nil {
			t.Fatalf("empty %d: %v %d stream %v", status, err, resp.StatusCode(), resp.BodyStream() != nil)
		}
	}
	if dials != 1 {
		t.Fatalf("%d connections, want 1", dials)
	}
	resp.Reset()
	if err := send(t, client, &resp, false); !errors.Is(err, errTooManyInterim) {
		t.Fatalf("endless 1xx: %v", err)
	}
}

// sized is what the tests see of an answerBody's reader.
type sized interface{ readerSize() int }

// An event stream's body is read through a small reader once its head is
// read, with the events that came with the head; a longer run of them, or a
// body of another type, stays in the connection's reader. Either way the
// body is whole and the connection is used again.
func TestEventStreamReaderShrinks(t *testing.T) {
	var dials int
	long := strings.Repeat("data: "+strings.Repeat("x", 100)+"\n\n", 24) // 2,592 bytes
	longChunks := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(long), long)
	body := "data: a\n\n"
	cl := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	client := pipeUpstream(t, &dials, wiretest.SSEHead+wiretest.SSEChunks, wiretest.SSEHead+longChunks, cl)
	for i, c := range []struct {
		want string
		size int
	}{
		{"data: a\n\ndata: b\n\n", sseReaderSize},
		{long, 4096}, // the test client's default ReadBufferSize
		{body, 4096},
	} {
		var resp fasthttp.Response
		if err := send(t, client, &resp, true); err != nil {
			t.Fatal(i, err)
		}
		if got := resp.BodyStream().(sized).readerSize(); got != c.size {
			t.Errorf("call %d: read through %d bytes, want %d", i, got, c.size)
		}
		got, err := io.ReadAll(resp.BodyStream())
		resp.CloseBodyStream()
		if err != nil || string(got) != c.want {
			t.Fatalf("call %d: %q %v", i, got, err)
		}
	}
	if dials != 1 {
		t.Fatalf("%d connections for three calls read whole, want 1", dials)
	}
}

// An event stream whose head came alone takes the small reader at once, and
// reads its events from the connection as they come.
func TestEventStreamHeadAlone(t *testing.T) {
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	events := make(chan string)
	go func() {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(server)); err != nil {
			return
		}
		io.WriteString(server, wiretest.SSEHead)
		for e := range events {
			io.WriteString(server, e)
		}
	}()
	hc := &fasthttp.HostClient{Addr: "upstream", Transport: answerTransport, Dial: func(string) (net.Conn, error) {
		dc := &deadlineConn{Conn: client}
		dc.local = connAddr{Addr: client.LocalAddr(), conn: dc}
		return dc, nil
	}}
	var resp fasthttp.Response
	if err := send(t, hc, &resp, true); err != nil {
		t.Fatal(err)
	}
	defer resp.CloseBodyStream()
	if got := resp.BodyStream().(sized).readerSize(); got != sseReaderSize {
		t.Fatalf("read through %d bytes, want %d", got, sseReaderSize)
	}
	go func() {
		events <- "9\r\ndata: a\n\n\r\n"
		events <- "9\r\ndata: b\n\n\r\n0\r\n\r\n"
		close(events)
	}()
	got, err := io.ReadAll(resp.BodyStream())
	if err != nil || string(got) != "data: a\n\ndata: b\n\n" {
		t.Fatalf("%q %v", got, err)
	}
}

// deadlineCounts are the read and the write deadlines set on the
// connections of deadlineCounter that share them.
type deadlineCounts struct{ reads, writes int }

// deadlineCounter counts the deadlines set on its connection.
type deadlineCounter struct {
	net.Conn
	n *deadlineCounts
}

func (c *deadlineCounter) SetReadDeadline(t time.Time) error {
	c.n.reads++
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineCounter) SetWriteDeadline(t time.Time) error {
	c.n.writes++
	return c.Conn.SetWriteDeadline(t)
}

// An answer not asked for as a stream that comes whole with its head moves no
// read deadline: the bound on its body (see deadlineConn.pinIdle) is armed
// only by a read that goes to the network, so kept-alive calls keep the
// first-byte deadline of the first one, as they did before the bound.
func TestWholeAnswerArmsNoDeadline(t *testing.T) {
	var n deadlineCounts
	client := pipeClient(func() (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", true
	}, func(c net.Conn) *deadlineConn {
		return &deadlineConn{Conn: &deadlineCounter{Conn: c, n: &n}, firstByte: 10 * time.Minute, idle: time.Minute}
	})
	for i := range 5 {
		var resp fasthttp.Response
		if err := send(t, client, &resp, false); err != nil || string(resp.Body()) != "{}" {
			t.Fatalf("call %d: %q %v", i, resp.Body(), err)
		}
	}
	if n.reads != 1 {
		t.Fatalf("%d read deadlines set over 5 calls, want the first call's only", n.reads)
	}
}

// The transport writes only a Request's head and body: a fasthttp.Request
// made otherwise is refused before a connection is taken, not serialised by
// fasthttp with headers the gateway never chose.
func TestTransportTakesOnlyRequests(t *testing.T) {
	var req fasthttp.Request
	req.SetRequestURI("http://upstream/")
	var resp fasthttp.Response
	if _, err := answerTransport.RoundTrip(&fasthttp.HostClient{Addr: "upstream"}, &req, &resp); err != errNotRaw {
		t.Fatalf("a plain fasthttp.Request: %v, want errNotRaw", err)
	}
}

// Kept-alive calls in quick succession arm the write deadline once: it moves
// only when it would be later by more than a sixteenth of the timeout (see
// DeadlineMoves), not at every request.
func TestWriteDeadlineArmedOnce(t *testing.T) {
	var n deadlineCounts
	client := pipeClient(func() (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", true
	}, func(c net.Conn) *deadlineConn {
		return &deadlineConn{Conn: &deadlineCounter{Conn: c, n: &n}, firstByte: 10 * time.Minute,
			idle: time.Minute, write: time.Minute}
	})
	for i := range 5 {
		var resp fasthttp.Response
		if err := send(t, client, &resp, false); err != nil || string(resp.Body()) != "{}" {
			t.Fatalf("call %d: %q %v", i, resp.Body(), err)
		}
	}
	if n.writes != 1 {
		t.Fatalf("%d write deadlines set over 5 calls, want the first call's only", n.writes)
	}
}

// An upstream that never reads the request fails the call with a timeout
// once the write has waited the write timeout, and the connection is closed:
// a net.Pipe takes no byte until the other end reads.
func TestWriteTimeout(t *testing.T) {
	closed := make(chan struct{})
	client := &fasthttp.HostClient{Addr: "upstream", Transport: answerTransport, Dial: func(string) (net.Conn, error) {
		c, server := net.Pipe()
		t.Cleanup(func() { server.Close() })
		go func() { // never reads; its write waits until the other end closes
			server.Write([]byte{0})
			close(closed)
		}()
		dc := &deadlineConn{Conn: c, firstByte: time.Minute, idle: time.Minute, write: 50 * time.Millisecond}
		dc.local = connAddr{Addr: c.LocalAddr(), conn: dc}
		return dc, nil
	}}
	var resp fasthttp.Response
	if err := send(t, client, &resp, false); err != fasthttp.ErrTimeout {
		t.Fatalf("%v, want fasthttp.ErrTimeout", err)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the connection was not closed")
	}
	if n := client.ConnsCount(); n != 0 {
		t.Fatalf("%d connections kept", n)
	}
}

// heads is an Observer that records the heads it is told of.
type heads struct {
	sent, read []int64
	statuses   []int
	errs       []error
}

func (h *heads) HeadRead(sent, read int64, status int, err error) {
	h.sent, h.read = append(h.sent, sent), append(h.read, read)
	h.statuses, h.errs = append(h.statuses, status), append(h.errs, err)
}
func (h *heads) IdleClosed() {}

// The connections' Observer is told of each answer's head, with its status,
// of when its request's write began and of when its head was read, on
// MonoNow's clock.
func TestObserverToldOfHeads(t *testing.T) {
	var obs heads
	client := pipeClient(func() (string, bool) {
		return "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", true
	}, func(c net.Conn) *deadlineConn {
		return &deadlineConn{Conn: c, obs: &obs}
	})
	before := MonoNow()
	var resp fasthttp.Response
	if err := send(t, client, &resp, false); err != nil {
		t.Fatal(err)
	}
	after := MonoNow()
	if len(obs.statuses) != 1 || obs.statuses[0] != 503 || obs.errs[0] != nil ||
		obs.sent[0] < before || obs.read[0] < obs.sent[0] || obs.read[0] > after {
		t.Fatalf("told %v %v sent %v read %v, want 503 between %d and %d", obs.statuses, obs.errs, obs.sent, obs.read, before, after)
	}
}

// holdsReader tells whether the body holds a reader.
func (b *answerBody[C]) holdsReader() bool { return b.br != nil }

// awaitingPipe is a connection that waits without reading as a rawio.Conn
// does, except that it does not wait: it records whether the body held a
// reader meanwhile, and the Read after it waits for the bytes.
type awaitingPipe struct {
	net.Conn
	body  func() interface{ holdsReader() bool }
	waits int
	held  int // waits during which the body held a reader
}

func (c *awaitingPipe) AwaitReadable() error {
	c.waits++
	if c.body().holdsReader() {
		c.held++
	}
	return nil
}

// An event stream's body waits for each next chunk without a reader, on a
// connection that can wait so: an idle stream holds none. The events come
// whole, in order, and the body ends as before.
func TestEventStreamIdlesWithoutReader(t *testing.T) {
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(server)); err != nil {
			return
		}
		io.WriteString(server, wiretest.SSEHead)
		for _, e := range []string{"9\r\ndata: a\n\n\r\n", "9\r\ndata: b\n\n\r\n", "0\r\n\r\n"} {
			io.WriteString(server, e)
		}
	}()
	var resp fasthttp.Response
	conn := &awaitingPipe{Conn: client, body: func() interface{ holdsReader() bool } {
		return resp.BodyStream().(interface{ holdsReader() bool })
	}}
	hc := &fasthttp.HostClient{Addr: "upstream", Transport: answerTransport, Dial: func(string) (net.Conn, error) {
		dc := &deadlineConn{Conn: conn}
		dc.local = connAddr{Addr: client.LocalAddr(), conn: dc}
		return dc, nil
	}}
	if err := send(t, hc, &resp, true); err != nil {
		t.Fatal(err)
	}
	defer resp.CloseBodyStream()
	body := resp.BodyStream().(interface {
		io.Reader
		Await() bool
	})
	var got []byte
	buf := make([]byte, 64)
	for {
		if !body.Await() {
			t.Fatal("a chunked body could not wait")
		}
		n, err := body.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != "data: a\n\ndata: b\n\n" {
		t.Fatalf("read %q", got)
	}
	if conn.waits == 0 || conn.held != 0 {
		t.Fatalf("%d waits without a read, %d of them holding a reader; want some, none", conn.waits, conn.held)
	}
}
