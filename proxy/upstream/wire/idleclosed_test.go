package wire

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// idleUpstream answers every request on a loopback socket with "ok" and
// hands the test each connection it accepts, so that the test can close it
// or write on it while it is idle. requests counts the requests it read.
type idleUpstream struct {
	ln       net.Listener
	conns    chan net.Conn
	requests atomic.Int64
}

func newIdleUpstream(t testing.TB) *idleUpstream {
	t.Helper()
	u := &idleUpstream{conns: make(chan net.Conn, 8)}
	u.ln = wiretest.AcceptEach(t, func(c net.Conn) {
		u.conns <- c
		go u.serve(c)
	})
	return u
}

func (u *idleUpstream) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		u.requests.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

// client returns a client of u with the gateway's dialer and transport;
// obs, when not nil, is told what its connections see; conns collects the
// connections it dials.
func (u *idleUpstream) client(obs Observer, conns *[]*deadlineConn) *fasthttp.HostClient {
	d := &dialer{connect: time.Minute, firstByte: time.Minute, idle: time.Minute, obs: obs}
	return dialingClient(u.ln.Addr().String(), d, conns)
}

// dialingClient returns a client to addr that dials with d and collects the
// connections it dials in conns.
func dialingClient(addr string, d *dialer, conns *[]*deadlineConn) *fasthttp.HostClient {
	dial := func(addr string) (net.Conn, error) {
		c, err := d.Dial(addr)
		if err == nil {
			*conns = append(*conns, c.(*deadlineConn))
		}
		return c, err
	}
	return &fasthttp.HostClient{Addr: addr, Dial: dial, Transport: answerTransport, MaxConns: 4}
}

// counts is an Observer that counts what it is told. Safe for concurrent
// use.
type counts struct {
	heads, idleClosed atomic.Int64
}

func (c *counts) HeadRead(int64, int64, int, error) { c.heads.Add(1) }
func (c *counts) IdleClosed()                       { c.idleClosed.Add(1) }

// setProbeAfter sets probeAfter to d for the test.
func setProbeAfter(t testing.TB, d time.Duration) {
	old := probeAfter
	probeAfter = d
	t.Cleanup(func() { probeAfter = old })
}

// awaitReadable waits, without reading, until c's socket has something to
// read: the upstream's FIN, reset or bytes have reached it.
func awaitReadable(t *testing.T, c *deadlineConn) {
	t.Helper()
	var buf [1]byte
	err := c.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN
	})
	if err != nil { // the read deadline, a minute
		t.Fatalf("the upstream's close never reached the connection: %v", err)
	}
}

// A pooled connection that the upstream closed while it was idle (a FIN, a
// reset) or wrote on unasked is found so before the next request is written
// on it: the call goes on a new connection and succeeds, the upstream reads
// it once, and it is not a stale call. Before, the call was written on the
// dead connection and failed as stale; on the one written on, it took the
// unasked bytes for its answer.
func TestClosedIdleConnectionIsReplaced(t *testing.T) {
	f := func(t *testing.T, act func(c net.Conn)) {
		t.Helper()
		setProbeAfter(t, 0) // every pooled connection is looked at
		u := newIdleUpstream(t)
		var stats counts
		var conns []*deadlineConn
		client := u.client(&stats, &conns)
		var resp fasthttp.Response
		if err := send(t, client, &resp, false); err != nil || string(resp.Body()) != "ok" {
			t.Fatalf("first call: %q %v", resp.Body(), err)
		}
		act(<-u.conns)
		awaitReadable(t, conns[0])
		resp.Reset()
		err := send(t, client, &resp, false)
		if err != nil || string(resp.Body()) != "ok" {
			t.Fatalf("call on the closed pool: %q %v (stale %v)", resp.Body(), err, Stale(&resp))
		}
		if len(conns) != 2 || u.requests.Load() != 2 {
			t.Fatalf("%d connections, %d requests; want 2 each", len(conns), u.requests.Load())
		}
		if got := stats.idleClosed.Load(); got != 1 {
			t.Fatalf("%d connections found closed, want 1", got)
		}
		if client.ConnsCount() != 1 {
			t.Fatalf("%d connections kept, want the new one", client.ConnsCount())
		}
	}
	t.Run("FIN", func(t *testing.T) { f(t, func(c net.Conn) { c.Close() }) })
	t.Run("reset", func(t *testing.T) {
		f(t, func(c net.Conn) {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		})
	})
	t.Run("unasked bytes", func(t *testing.T) {
		f(t, func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly") })
	})
}

// A connection read from within probeAfter is not looked at: the request is
// written on it though the upstream closed it, and the call fails as stale,
// to be sent again by the endpoint's class. Busy connections pay no system
// call.
func TestRecentConnectionIsNotProbed(t *testing.T) {
	setProbeAfter(t, time.Hour)
	u := newIdleUpstream(t)
	var stats counts
	var conns []*deadlineConn
	client := u.client(&stats, &conns)
	var resp fasthttp.Response
	if err := send(t, client, &resp, false); err != nil {
		t.Fatal(err)
	}
	(<-u.conns).Close()
	awaitReadable(t, conns[0])
	resp.Reset()
	if err := send(t, client, &resp, false); err == nil || !Stale(&resp) {
		t.Fatalf("err %v, stale %v: want a stale call", err, Stale(&resp))
	}
	if got := stats.idleClosed.Load(); got != 0 || len(conns) != 1 {
		t.Fatalf("%d found closed, %d connections; want 0 and 1", got, len(conns))
	}
}

// Over TLS the look is at the TCP socket under it: an upstream that closes
// the idle connection sends close_notify, pending bytes there, then its FIN.
// The call goes on a new connection.
func TestClosedIdleConnectionOverTLS(t *testing.T) {
	setProbeAfter(t, 0)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := &dialer{connect: time.Minute, firstByte: time.Minute, idle: time.Minute,
		tls: &tls.Config{ServerName: "example.com", RootCAs: roots}, obs: new(counts)}
	var conns []*deadlineConn
	client := dialingClient(srv.Listener.Addr().String(), d, &conns)
	var resp fasthttp.Response
	if err := send(t, client, &resp, false); err != nil || string(resp.Body()) != "ok" {
		t.Fatalf("first call: %q %v", resp.Body(), err)
	}
	srv.CloseClientConnections()
	awaitReadable(t, conns[0])
	resp.Reset()
	if err := send(t, client, &resp, false); err != nil || string(resp.Body()) != "ok" {
		t.Fatalf("call on the closed pool: %q %v (stale %v)", resp.Body(), err, Stale(&resp))
	}
	if got := d.obs.(*counts).idleClosed.Load(); got != 1 || len(conns) != 2 {
		t.Fatalf("%d found closed, %d connections; want 1 and 2", got, len(conns))
	}
}

// idleConn returns a live connection of the gateway's dialer to u that
// carried one answer and is now idle.
func idleConn(t testing.TB) *deadlineConn {
	u := newIdleUpstream(t)
	var conns []*deadlineConn
	client := u.client(nil, &conns)
	req, resp := get("/"), fasthttp.AcquireResponse()
	defer ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err := req.Do(client, resp, nil, false); err != nil || len(conns) != 1 {
		t.Fatalf("%v, %d connections", err, len(conns))
	}
	return conns[0]
}

// BenchmarkClosedWhileIdle is what acquiring a pooled connection costs for
// the look: nothing but a clock read on one read from within probeAfter
// (busy), one recv(2) on one idle for longer (idle).
func BenchmarkClosedWhileIdle(b *testing.B) {
	for _, idle := range []bool{false, true} {
		name := "busy"
		if idle {
			name = "idle"
		}
		b.Run(name, func(b *testing.B) {
			c := idleConn(b)
			if idle {
				c.lastRead = time.Now().Add(-2 * probeAfter)
			}
			b.ReportAllocs()
			for b.Loop() {
				if c.closedWhileIdle(now()) {
					b.Fatal("a live connection found closed")
				}
			}
		})
	}
}
