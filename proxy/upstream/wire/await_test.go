package wire

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// scriptedRaw is a syscall.RawConn whose Read drives f as the runtime does
// (f, then a wait while f returns false) and records, for each call of f,
// whether it asked for a wait and how many writes had reached the connection
// before and after it.
type scriptedRaw struct {
	syscall.RawConn
	conn  *countingConn
	steps []rawStep
}

type rawStep struct {
	done          bool
	before, after int
}

func (r *scriptedRaw) Read(f func(uintptr) bool) error {
	for {
		before := r.conn.writes
		done := f(0)
		r.steps = append(r.steps, rawStep{done, before, r.conn.writes})
		if done || len(r.steps) > 4 {
			return nil
		}
	}
}

type countingConn struct {
	net.Conn
	writes int
	err    error
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

func (c *countingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

// Read finds an answer's first bytes.
func (c *countingConn) Read(p []byte) (int, error) { return copy(p, "HTTP/1.1 200 OK\r\n"), nil }

func newAwaitConn() (*deadlineConn, *countingConn, *scriptedRaw) {
	cc := &countingConn{}
	raw := &scriptedRaw{conn: cc}
	return &deadlineConn{Conn: cc, raw: raw, firstByte: time.Minute, idle: time.Minute}, cc, raw
}

// A request written whole in its flush goes out inside the wait's first step,
// which then asks for the wait: the readiness is reset before the request
// leaves, so the answer cannot be missed, and the read after finds it. The
// wait's next step ends it.
func TestFlushAwaitWritesInsideTheWait(t *testing.T) {
	c, cc, raw := newAwaitConn()
	bw := bufio.NewWriter(c)
	bw.WriteString("POST / HTTP/1.1\r\n\r\n")
	if err := c.flushAwait(bw, droppingPool{}); err != nil {
		t.Fatal(err)
	}
	want := []rawStep{{done: false, before: 0, after: 1}, {done: true, before: 1, after: 1}}
	if len(raw.steps) != len(want) || raw.steps[0] != want[0] || raw.steps[1] != want[1] {
		t.Fatalf("steps %+v, want %+v", raw.steps, want)
	}
	if cc.writes != 1 || !c.awaiting || c.reused {
		t.Fatalf("writes %d, awaiting %v, reused %v; want 1, true, false", cc.writes, c.awaiting, c.reused)
	}
	if c.deadline.IsZero() {
		t.Fatal("no first-byte deadline was armed before the wait")
	}
}

// One reading of the clock as a request's write begins (the transport's,
// beginSend) arms the write's deadline and the answer's, and the reads of
// the answer's head keep that deadline without a reading of their own; the
// head's reading, once it is read, is the connection's last read.
func TestRequestDeadlinesShareOneReading(t *testing.T) {
	c, _, raw := newAwaitConn()
	c.write = time.Minute
	at := now().Add(-time.Hour) // no reading of the clock gives it now
	c.beginSend(at)
	bw := bufio.NewWriter(c)
	bw.WriteString("POST / HTTP/1.1\r\n\r\n")
	if err := c.flushAwait(bw, droppingPool{}); err != nil || len(raw.steps) != 2 {
		t.Fatalf("err %v, steps %+v; want a wait", err, raw.steps)
	}
	if !c.writeDeadline.Equal(at.Add(c.write)) || !c.deadline.Equal(at.Add(c.firstByte)) {
		t.Fatalf("write deadline %v, read deadline %v; want both from %v", c.writeDeadline, c.deadline, at)
	}
	var p [64]byte
	for range 2 { // the head's first read and one more for its rest
		if _, err := c.Read(p[:]); err != nil {
			t.Fatal(err)
		}
	}
	if !c.deadline.Equal(at.Add(c.firstByte)) || c.answers != 1 {
		t.Fatalf("read deadline %v after the head's reads, answers %d; want %v, 1", c.deadline, c.answers, at.Add(c.firstByte))
	}
	read := at.Add(time.Second)
	c.headRead(false, read)
	if !c.lastRead.Equal(read) {
		t.Fatalf("last read %v, want the head's %v", c.lastRead, read)
	}
	// The next request reads the clock for a piece written without one.
	c.Write([]byte("POST / HTTP/1.1\r\n\r\n"))
	if !c.writeDeadline.After(at.Add(time.Hour)) {
		t.Fatalf("write deadline %v, want one from the clock", c.writeDeadline)
	}
}

// A failed flush does not wait, and its error is the caller's.
func TestFlushAwaitFailedFlush(t *testing.T) {
	c, cc, raw := newAwaitConn()
	cc.err = errors.New("broken pipe")
	bw := bufio.NewWriter(c)
	bw.WriteString("POST / HTTP/1.1\r\n\r\n")
	if err := c.flushAwait(bw, droppingPool{}); err == nil || err.Error() != "broken pipe" {
		t.Fatalf("err %v, want broken pipe", err)
	}
	if len(raw.steps) != 1 || !raw.steps[0].done {
		t.Fatalf("steps %+v, want one that ends without a wait", raw.steps)
	}
}

// No wait where what is unread may have arrived before it was armed: after
// part of the request went out already (the upstream may have answered it
// early), or on a connection idle for longer than awaitAfter (the upstream
// may have closed it). Those flush plainly, and the read finds what is there.
func TestFlushAwaitOnlyWhereNothingCanBeUnread(t *testing.T) {
	for name, prepare := range map[string]func(*deadlineConn){
		"part of the request written": func(c *deadlineConn) { c.Write([]byte("POST / HTTP/1.1\r\n")) },
		"idle connection": func(c *deadlineConn) {
			c.answers, c.lastRead = 3, time.Now().Add(-2*awaitAfter)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, cc, raw := newAwaitConn()
			prepare(c)
			before := cc.writes
			bw := bufio.NewWriter(c)
			bw.WriteString("\r\n")
			if err := c.flushAwait(bw, droppingPool{}); err != nil {
				t.Fatal(err)
			}
			if len(raw.steps) != 0 || cc.writes != before+1 {
				t.Fatalf("steps %+v, writes %d; want no wait and one flush", raw.steps, cc.writes-before)
			}
		})
	}
	// A connection read from a moment ago still waits.
	c, _, raw := newAwaitConn()
	c.answers, c.lastRead = 3, time.Now()
	bw := bufio.NewWriter(c)
	bw.WriteString("\r\n")
	if err := c.flushAwait(bw, droppingPool{}); err != nil || len(raw.steps) != 2 {
		t.Fatalf("err %v, steps %+v; want a wait", err, raw.steps)
	}
}

// Over TLS the wait is on the TCP connection under it: calls on a new and on
// reused connections get their answers, the reused ones through the wait.
func TestFlushAwaitOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "answer to "+r.URL.Path)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := &dialer{connect: time.Minute, firstByte: time.Minute, idle: time.Minute,
		tls: &tls.Config{ServerName: "example.com", RootCAs: roots}}
	var conns []*deadlineConn
	dial := func(addr string) (net.Conn, error) {
		c, err := d.Dial(addr)
		if err == nil {
			conns = append(conns, c.(*deadlineConn))
		}
		return c, err
	}
	client := &fasthttp.HostClient{Addr: srv.Listener.Addr().String(), Dial: dial, Transport: answerTransport}
	for i := range 3 {
		req, resp := get(fmt.Sprintf("/%d", i)), fasthttp.AcquireResponse()
		err := req.Do(client, resp, nil, false)
		if err != nil || string(resp.Body()) != fmt.Sprintf("answer to /%d", i) {
			t.Fatalf("call %d: %v, %q", i, err, resp.Body())
		}
		ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	if len(conns) != 1 || conns[0].raw == nil || conns[0].answers != 3 {
		t.Fatalf("%d connections; want 1, with its TCP connection, that read 3 answers", len(conns))
	}
}

// An upstream that closes a connection before reading the request (here at
// once, on a new connection) has sent its FIN before the wait was armed. The
// request then meets a reset, which wakes the wait: the call fails at once,
// not at the first-byte deadline (an hour here).
func TestFlushAwaitUpstreamClosedFirst(t *testing.T) {
	ln := wiretest.AcceptEach(t, func(c net.Conn) { c.Close() })
	d := &dialer{connect: time.Minute, firstByte: time.Hour, idle: time.Hour}
	dialed := make(chan struct{}, 1)
	dial := func(addr string) (net.Conn, error) {
		c, err := d.Dial(addr)
		if err == nil {
			// The FIN is in before the request is written.
			buf := make([]byte, 1)
			c.(*deadlineConn).raw.Read(func(fd uintptr) bool {
				n, _ := syscall.Read(int(fd), buf)
				return n >= 0
			})
			dialed <- struct{}{}
		}
		return c, err
	}
	client := &fasthttp.HostClient{Addr: ln.Addr().String(), Dial: dial, Transport: answerTransport}
	req, resp := get("/"), fasthttp.AcquireResponse()
	defer ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	done := make(chan error, 1)
	go func() { done <- req.Do(client, resp, nil, false) }()
	<-dialed
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a call to a closed connection succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the call waited for its first-byte deadline: the reset did not wake the wait")
	}
}

// A request's write buffer goes back to its pool once the request is
// flushed, inside the wait's first step, before the wait for the answer:
// calls that all wait for their answers at once (a burst of streams opening,
// each waiting for its head) do not hold a buffer each.
func TestWriterNotHeldWhileAnswerAwaited(t *testing.T) {
	c, cc, raw := newAwaitConn()
	bw := bufio.NewWriter(c)
	bw.WriteString("POST / HTTP/1.1\r\n\r\n")
	pool := &recordingPool{raw: raw, conn: cc}
	if err := c.flushAwait(bw, pool); err != nil {
		t.Fatal(err)
	}
	if len(pool.released) != 1 || pool.released[0] != (release{bw: bw, steps: 0, writes: 1}) {
		t.Fatalf("released %+v; want the buffer once, flushed, inside the first step (before the wait)", pool.released)
	}
	if len(raw.steps) != 2 || raw.steps[0].done {
		t.Fatalf("steps %+v; want the wait after the flush", raw.steps)
	}
}

// droppingPool is a writerPool that drops what it is given.
type droppingPool struct{}

func (droppingPool) ReleaseWriter(*bufio.Writer) {}

// recordingPool records each buffer given back to it, with how many of the
// wait's steps had ended and how many writes had reached the connection.
type recordingPool struct {
	raw      *scriptedRaw
	conn     *countingConn
	released []release
}

type release struct {
	bw            *bufio.Writer
	steps, writes int
}

func (p *recordingPool) ReleaseWriter(bw *bufio.Writer) {
	p.released = append(p.released, release{bw: bw, steps: len(p.raw.steps), writes: p.conn.writes})
}
