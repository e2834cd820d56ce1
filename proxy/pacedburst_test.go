package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

// pacedBurst is n paced SSE streams through one gateway over loopback TCP,
// as the harness's llm-streams holds them: every stream's upstream sends one
// frame at each burst, and the clients read them all before the next. The
// upstream's writes and the clients' reads are made from the caller's
// goroutine, one stream after another, so that the process's CPU beyond the
// gateway's is little more than the system calls.
type pacedBurst struct {
	up      []net.Conn // the upstream's side of each stream's upstream connection
	clients []net.Conn
	brs     []*bufio.Reader
	// chunk is a frame as the upstream sends it, and as the client gets it
	// (the gateway relays each read's events as one chunk).
	chunk []byte
	got   []byte
}

// newPacedBurst opens n streams, one after another, each to its head; the
// streams end and the connections close at the test's end.
func newPacedBurst(tb testing.TB, n int) *pacedBurst {
	tb.Helper()
	needFiles(tb, uint64(4*n+256)) // a client and an upstream connection a stream, both ends in this process
	s := &pacedBurst{
		chunk: fmt.Appendf(nil, "%x\r\n%s\r\n", len(pacedFrame), pacedFrame),
		got:   make([]byte, 0, 512),
	}
	var mu sync.Mutex
	opened := make(chan net.Conn)
	ended := make(chan struct{})
	up := tcpUpstream(tb, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		select {
		case opened <- c:
		case <-ended: // the benchmark failed before it took the stream
			return
		}
		<-ended
		mu.Lock() // the last bursts' writes are done
		defer mu.Unlock()
		done := "data: [DONE]\n\n"
		fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(done), done)
	})
	cfg, err := config.Parse(fmt.Appendf(nil, `
keys: [{id: k, key: key-1}]
upstreams: [{name: u, family: beta, base_url: "http://%s/v1", api_key: up, max_conns: %d}]
models: [{id: m, upstreams: [u]}]
`, up, n+16), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	_, _, ln := listenGateway(tb, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tb.Cleanup(func() {
		mu.Lock()
		close(ended)
		mu.Unlock()
		for _, c := range s.clients {
			c.Close()
		}
	})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req := "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer key-1\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	for range n {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		s.clients = append(s.clients, conn)
		conn.SetDeadline(time.Now().Add(10 * time.Minute))
		io.WriteString(conn, req)
		select {
		case c := <-opened:
			s.up = append(s.up, c)
		case <-time.After(time.Minute):
			tb.Fatalf("stream %d: no upstream call", len(s.up))
		}
		br := bufio.NewReaderSize(conn, 4<<10)
		var head fasthttp.ResponseHeader
		if err := head.Read(br); err != nil || head.StatusCode() != 200 {
			tb.Fatalf("stream %d: head: %v %d", len(s.up), err, head.StatusCode())
		}
		s.brs = append(s.brs, br)
	}
	return s
}

// needFiles raises the open-files soft limit to the hard one when it is
// below n, and skips the test when the hard one is too.
func needFiles(tb testing.TB, n uint64) {
	tb.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Skipf("open-files limit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		tb.Skipf("needs %d open files, the hard limit is %d", n, lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Skipf("open-files limit: %v", err)
	}
}

// send has stream i's upstream send one frame.
func (s *pacedBurst) send(i int) error {
	_, err := s.up[i].Write(s.chunk)
	return err
}

// receive reads the frame at stream i's client: one chunk, the frame.
func (s *pacedBurst) receive(i int) error {
	s.got = s.got[:len(s.chunk)]
	if _, err := io.ReadFull(s.brs[i], s.got); err != nil {
		return err
	}
	if !bytes.Equal(s.got, s.chunk) {
		return fmt.Errorf("stream %d: got %q, want %q", i, s.got, s.chunk)
	}
	return nil
}

// BenchmarkPacedBurst is BenchmarkPacedEvent over many streams at once, as
// the harness's paced streams come: an op is one event, and each burst sends
// one on every stream, then reads them all at the clients. At 1,000 streams,
// each event finds its stream's state (the call, the relay, the goroutine's
// stack, the buffers) cold, as it does under the harness. cpu-ns/op is the
// whole process's CPU per event (the upstream's writes and the clients'
// reads too): compare builds of the gateway.
func BenchmarkPacedBurst(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			s := newPacedBurst(b, n)
			receive := func(k int) { // reads the event sent on each of the first k streams
				for i := range k {
					if err := s.receive(i); err != nil {
						b.Fatal(err)
					}
				}
			}
			for range 3 {
				for i := range n {
					s.send(i)
				}
				receive(n)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(pacedFrame)))
			cpu0, i, started := processCPU(), 0, resumers.Started()
			for b.Loop() {
				if err := s.send(i); err != nil {
					b.Fatal(err)
				}
				if i++; i == n { // the burst is sent: the clients read it
					receive(n)
					i = 0
				}
			}
			receive(i)
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(resumers.Started()-started)/float64(b.N), "resumers/op")
		})
	}
}
