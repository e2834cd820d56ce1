package edgetls

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// A client hello that stalls, junk instead of one or a plaintext request on
// the TLS port is closed within the handshake's bound, well before the
// server's own read timeout, and leaves no goroutine behind.
func TestHandshakeBounded(t *testing.T) {
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 90*24*time.Hour)
	certs, err := New(Options{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, HandshakeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler:     func(ctx *fasthttp.RequestCtx) { ctx.WriteString("ok") },
		ReadTimeout: 10 * time.Minute, IdleTimeout: 10 * time.Minute,
		Logger: discard{},
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(certs.Listener(ln)) }()
	defer func() {
		srv.Shutdown()
		<-served
	}()
	f := func(name string, send []byte) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(send) > 0 {
			c.Write(send)
		}
		// A guard against a hang: the bound is 300ms, the server's own read
		// timeout 10 minutes.
		c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err = io.Copy(io.Discard, c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: the connection was not closed", name)
		}
	}
	f("a stalled hello", nil)
	f("half a hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01})
	f("junk", []byte("\x00\x01\x02junk junk junk\r\n\r\n"))
	f("a plaintext request", []byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	// A real client is served meanwhile.
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) == 0 {
		t.Fatal("no answer over TLS")
	}
	c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for srv.GetOpenConnectionsCount() > 0 || connGoroutines() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open; goroutines left:\n%s", srv.GetOpenConnectionsCount(), connGoroutines())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connGoroutines returns the stacks of the goroutines serving a connection
// or in TLS: fasthttp's idle workers and clock stay between connections.
func connGoroutines() string {
	buf := make([]byte, 1<<20)
	var left []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "serveConn") || strings.Contains(g, "crypto/tls") || strings.Contains(g, "edgetls.(*Conn)") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}

type discard struct{}

func (discard) Printf(string, ...any) {}
