package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/internal/netfault"
	"github.com/modelgate/gateway/proxy/clientconn"
)

// TestAcceptErrorsAreRetried: a failed accept on either listener is counted
// and tried again; the server keeps serving and does not return until it is
// shut down.
func TestAcceptErrorsAreRetried(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		listener string
		wrap     func(net.Listener) net.Listener
		errno    syscall.Errno
	}{
		{"client", e.gw.Listener, syscall.EMFILE},
		{"client", e.gw.Listener, syscall.ECONNABORTED},
		{"admin", e.gw.AdminListener, syscall.ENOBUFS},
		{"admin", e.gw.AdminListener, syscall.ENFILE},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		counter := e.gw.obs.acceptErrs[clientListenerLabel]
		srv := e.gw.NewServer()
		if tc.listener == "admin" {
			counter, srv = e.gw.obs.acceptErrs[adminListenerLabel], e.gw.NewAdminServer()
		}
		before := counter.Get()
		served := make(chan error, 1)
		go func() {
			served <- srv.Serve(tc.wrap(&netfault.Listener{Listener: ln, N: 3, Err: netfault.AcceptError(tc.errno)}))
		}()
		status := getHealthz(t, ln.Addr().String())
		if status != fasthttp.StatusOK {
			t.Fatalf("%s listener, %v: /healthz answered %d", tc.listener, tc.errno, status)
		}
		if got := counter.Get() - before; got != 3 {
			t.Errorf("%s listener, %v: %d accept errors counted, want 3", tc.listener, tc.errno, got)
		}
		select {
		case err := <-served:
			t.Fatalf("%s listener, %v: the server returned %v", tc.listener, tc.errno, err)
		default:
		}
		if err := srv.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatalf("%s listener: Serve returned %v after Shutdown, want nil", tc.listener, err)
		}
	}
	if !strings.Contains(e.logBuf.String(), "cannot accept a connection") {
		t.Error("no accept error was logged")
	}
	m := e.metricsText()
	for _, want := range []string{`gateway_accept_errors_total{listener="client"} 6`, `gateway_accept_errors_total{listener="admin"} 6`,
		"gateway_client_connections_refused_total 0", "gateway_client_connections ", "gateway_upstream_connections "} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// getHealthz asks addr for /healthz on a connection of its own and returns
// the status. A hung server fails the test after 30 s.
func getHealthz(t *testing.T, addr string) int {
	t.Helper()
	c := &fasthttp.Client{ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	status, _, err := c.GetTimeout(nil, "http://"+addr+"/healthz", 30*time.Second)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	return status
}

// TestDescriptorLimit lowers the process's descriptor limit under a serving
// gateway. Client connections are refused while descriptors are left for
// the upstream dials of those open, so that a call on each of them reaches
// its deployment; a stream in flight completes; accepts that fail for want
// of a descriptor are counted and retried, and the server serves again once
// descriptors are free. It never returns.
//
// The limit is the process's: the test does not run in parallel, and puts
// the limit back when it ends.
func TestDescriptorLimit(t *testing.T) {
	e := newEnv(t, func(y string) string {
		return strings.Replace(y, "idle: 10s}", "idle: 10s, idle_conn: 30s}", 1) // no upstream connection closes on its own while the test runs
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := e.gw.NewServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(e.gw.Listener(ln)) }()
	defer func() {
		select {
		case err := <-served:
			t.Fatalf("the server returned %v", err)
		default:
		}
		srv.Shutdown()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	}()
	saved := clientconn.SetRecountEvery(0) // count at every accept near the limit: the test's own connections are not the gateway's
	t.Cleanup(func() { clientconn.SetRecountEvery(saved) })

	stream := dialRaw(t, addr)
	fmt.Fprint(stream, rawStreamChat(10, "100ms"))
	sr := bufio.NewReader(stream)
	readUntil(t, sr, "data: ") // the stream is in flight

	lowerDescriptorLimit(t, 150)
	clientconn.CountDescriptors()

	// Client connections until one is refused: each one open holds an
	// upstream dial in reserve.
	clientsBefore := clientconn.OpenClients()
	var held []net.Conn
	for len(held) < 150 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v (the process ran out before the gateway refused a connection)", len(held), err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if status, err := roundTrip(c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			c.Close()
			break // refused
		} else if status != 200 {
			t.Fatalf("/healthz on connection %d: %d", len(held), status)
		}
		held = append(held, c)
	}
	if e.gw.obs.refused.Get() == 0 {
		t.Fatalf("%d client connections open under a limit of %d, none refused", len(held), clientconn.DescriptorLimit())
	}
	t.Logf("%d client connections served, then refused; limit %d", len(held), clientconn.DescriptorLimit())
	readUntil(t, sr, "data: [DONE]")

	// Every connection open may make a call that needs an upstream one.
	var wg sync.WaitGroup
	statuses := make([]int, len(held))
	for i, c := range held {
		wg.Go(func() {
			statuses[i], _ = roundTrip(c, rawChat(keyA, "", `{"model":"chat-model","messages":[{"role":"user","content":"x"}]}`))
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("chat on held connection %d: status %d", i, s)
		}
	}
	for _, c := range held {
		c.Close()
	}
	awaitClients(t, clientsBefore)

	// With no descriptor left at all: the accept fails, is counted and
	// retried, and a stream in flight goes on.
	stream2 := dialRaw(t, addr)
	fmt.Fprint(stream2, rawStreamChat(10, "100ms"))
	sr2 := bufio.NewReader(stream2)
	readUntil(t, sr2, "data: ")
	errs, refused := e.gw.obs.acceptErrs[clientListenerLabel], e.gw.obs.refused.Get()
	errsBefore := errs.Get()
	pending, answered := acceptWithoutDescriptor(t, addr, errs)
	if errs.Get() == errsBefore {
		t.Fatal("no accept error counted")
	}
	select {
	case res := <-answered:
		// Accepted while the files close, it may find no descriptor to
		// count them with yet, and be refused.
		if (res.err != nil || res.status != 200) && e.gw.obs.refused.Get() == refused {
			t.Fatalf("the connection accepted once descriptors were free: %d, %v", res.status, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not served once descriptors were free")
	}
	pending.Close()
	readUntil(t, sr2, "data: [DONE]")
	if status := getHealthz(t, addr); status != 200 {
		t.Fatalf("/healthz after: %d", status)
	}
}

// awaitClients waits until the gateway has closed its side of the client
// connections the test closed: until no more than n are open.
func awaitClients(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // an outcome awaited, not a speed
	for clientconn.OpenClients() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d client connections still open, want %d", clientconn.OpenClients(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lowerDescriptorLimit sets the soft RLIMIT_NOFILE to the descriptors open
// now and free more, and puts it back when the test ends.
func lowerDescriptorLimit(t *testing.T, free int64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	open, err := clientconn.OpenDescriptors()
	if err != nil {
		t.Skipf("cannot count the open descriptors: %v", err)
	}
	saved := lim
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
			t.Errorf("cannot restore the descriptor limit: %v", err)
		}
		clientconn.CountDescriptors()
	})
	lim.Cur = uint64(open + free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

type answer struct {
	status int
	err    error
}

// acceptWithoutDescriptor makes the gateway's accept fail for want of a
// descriptor: it opens files until none is left, closes one, and connects
// with it. Once errs counts an accept error, it closes the files: the
// connection it returns is then accepted, and its /healthz answered on the
// channel. Should a descriptor free itself in between and the connection be
// accepted at once, it tries again.
func acceptWithoutDescriptor(t *testing.T, addr string, errs *metrics.Counter) (net.Conn, <-chan answer) {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		before := errs.Get()
		files := exhaustDescriptors(t)
		c, err := dialWithOneDescriptor(&files, addr)
		if err != nil {
			closeAll(files)
			t.Fatal(err)
		}
		answered := make(chan answer, 1)
		go func() {
			c.SetDeadline(time.Now().Add(60 * time.Second))
			status, err := roundTrip(c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
			answered <- answer{status, err}
		}()
		counted := false
		deadline := time.Now().Add(30 * time.Second) // an outcome awaited, not a speed
		for !counted && len(answered) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			counted = errs.Get() > before
		}
		closeAll(files)
		if counted {
			return c, answered
		}
		c.Close()
		<-answered
	}
	t.Fatal("no accept failed for want of a descriptor in 5 attempts")
	return nil, nil
}

// exhaustDescriptors opens /dev/null until the process has no descriptor
// left, and returns the files.
func exhaustDescriptors(t *testing.T) []*os.File {
	t.Helper()
	var files []*os.File
	for len(files) < 1<<16 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				closeAll(files)
				t.Fatal(err)
			}
			return files
		}
		files = append(files, f)
	}
	closeAll(files)
	t.Fatal("the descriptor limit was not reached")
	return nil
}

// dialWithOneDescriptor closes one of files and connects to addr with the
// descriptor freed; when another took it first, it closes one more.
func dialWithOneDescriptor(files *[]*os.File, addr string) (net.Conn, error) {
	for len(*files) > 0 {
		last := len(*files) - 1
		(*files)[last].Close()
		*files = (*files)[:last]
		c, err := net.Dial("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EMFILE) {
			return c, err
		}
	}
	return nil, errors.New("no descriptor could be freed")
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// dialRaw connects to addr; the connection closes with the test, and a read
// or write on it that hangs fails after 30 s.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// rawStreamChat is a streamed chat call of events events, delay apart.
func rawStreamChat(events int, delay string) string {
	return rawChat(keyA, fmt.Sprintf("x-sim-events: %d\r\nx-sim-event-delay: %s\r\n", events, delay),
		`{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"x"}]}`)
}

// readUntil reads lines from r until one that starts with prefix.
func readUntil(t *testing.T, r *bufio.Reader, prefix string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading until %q: %v", prefix, err)
		}
		if strings.HasPrefix(line, prefix) {
			return
		}
	}
}

// roundTrip writes req on c and reads the answer's status and body.
func roundTrip(c net.Conn, req string) (int, error) {
	if _, err := c.Write([]byte(req)); err != nil {
		return 0, err
	}
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}
