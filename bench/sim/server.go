package sim

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Options configure one simulated deployment. The zero value is usable: every
// field has a default, and an empty key accepts any non-empty key of that family.
type Options struct {
	Name     string // deployment name; echoed in the x-sim-deployment header and in answer text
	AlphaKey string // expected x-api-key (alpha)
	BetaKey  string // expected Authorization: Bearer (beta)
	GammaKey string // expected x-goog-api-key (gamma)

	Latency      time.Duration // added before the answer headers
	StreamEvents int           // content deltas per stream (default 20)
	EventDelay   time.Duration // pause before each stream frame but the first
	FirstEvent   time.Duration // pause between a stream's headers and its first frame
	// Stamp starts every stream frame with the comment line ": t=<unix ns>\n",
	// the frame's send time, which SSE clients ignore and a relay passes on.
	Stamp     bool
	ChatBytes int // approximate size of a plain answer's text (default 400)

	// NoRecord turns recording off, for benchmarks: Requests then returns nothing.
	NoRecord bool
	// RecordLimit bounds the recorded requests; the oldest are dropped (default 10000).
	RecordLimit int
	// Models lists the model ids of GET /v1/models. When it is non-empty, calls for
	// other models fail with the family's native "model not found" error.
	Models []string
}

// Limits on what a request header or option may ask for.
const (
	maxEvents     = 100000
	maxImageBytes = 64 << 20
	maxDelay      = 10 * time.Minute
	maxBodySize   = 64 << 20
)

// EnsureDefaults fills zero fields with their defaults and clamps the others.
func (o *Options) EnsureDefaults() {
	if o.Name == "" {
		o.Name = "sim"
	}
	if o.StreamEvents <= 0 {
		o.StreamEvents = 20
	}
	o.StreamEvents = min(o.StreamEvents, maxEvents)
	if o.ChatBytes <= 0 {
		o.ChatBytes = 400
	}
	o.ChatBytes = min(o.ChatBytes, 16<<20)
	if o.RecordLimit <= 0 {
		o.RecordLimit = 10000
	}
	if len(o.Models) == 0 {
		o.Models = nil
	}
}

// Fault is a misbehaviour applied to answers; the zero value means none.
type Fault struct {
	Status         int           // answer this status with the family's native error body
	Reset          bool          // close the connection without answering
	CutAfter       int           // send this many stream frames (or plain body bytes), then drop the connection
	ErrorAfter     int           // send this many stream frames, then the family's in-stream error
	FirstByteDelay time.Duration // delay before any byte of the answer
	// RetryAfter, with Status, is sent as the answer's retry-after header.
	RetryAfter string
	// DropIdle answers normally, then closes the connection without
	// announcing it (no Connection: close), as a server whose keep-alive
	// timeout ran out does: the client's next request on it fails.
	DropIdle bool
	// Times, with SetFault, limits the fault to the next Times requests;
	// zero means every request.
	Times int
}

// Request is a copy of one received request.
type Request struct {
	Method   string
	Path     string // as received, not decoded
	RawQuery string
	Header   http.Header // canonical names
	Body     []byte      // the exact bytes received
}

// Server simulates one provider deployment. Create it with New or Listen.
// It is safe for concurrent use.
type Server struct {
	o     Options
	ids   idGen
	now   func() time.Time
	text  string // the answer text of every plain answer and stream
	fault atomic.Pointer[armedFault]
	stamp atomic.Pointer[stamp] // see resetStamp
	srv   *fasthttp.Server

	recMu   sync.Mutex
	recs    []Request // a ring of at most RecordLimit requests
	recNext int       // index of the oldest request once the ring is full

	responses responseStore
	images    imageStore
	pngs      sync.Map // pngKey -> []byte: generated base images

	lnMu    sync.Mutex
	lns     []net.Listener
	conns   map[*trackedConn]struct{}
	closed  bool
	done    chan struct{} // closed by Close: ends pending sleeps
	serving sync.WaitGroup
}

// New returns a Server for o; serve it with Serve or use Handler directly.
func New(o Options) *Server {
	return newServer(o, randomSeed(), time.Now)
}

// newServer is New with a fixed id seed and clock, for deterministic transcripts.
func newServer(o Options, seed uint64, now func() time.Time) *Server {
	o.EnsureDefaults()
	s := &Server{o: o, now: now, conns: make(map[*trackedConn]struct{}), done: make(chan struct{})}
	s.ids.seed = seed
	s.text = answerText(o.Name, o.ChatBytes)
	s.responses.init(1 << 16)
	s.images.init(256)
	s.srv = &fasthttp.Server{
		Handler:                       s.Handler,
		Name:                          "upstream-sim",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisablePreParseMultipartForm:  true,
		DisableHeaderNamesNormalizing: false,
		ReadBufferSize:                32 << 10,
		MaxRequestBodySize:            maxBodySize,
		CloseOnShutdown:               true,
		Logger:                        quietLogger{},
	}
	return s
}

// answerText builds the deterministic answer text of a deployment, about size bytes.
func answerText(name string, size int) string {
	const filler = " The quick brown fox jumps over the lazy dog."
	b := make([]byte, 0, size+len(filler))
	b = fmt.Appendf(b, "Simulated answer from deployment %s.", name)
	for len(b) < size {
		b = append(b, filler...)
	}
	return string(b)
}

// Listen listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine.
func Listen(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %q: %w", addr, err)
	}
	s := New(o)
	tl, err := s.track(ln)
	if err != nil {
		return nil, err
	}
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.serveTracked(tl)
	}()
	return s, nil
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("sim: server closed")

// Serve answers the connections accepted on ln until Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	tl, err := s.track(ln)
	if err != nil {
		return err
	}
	return s.serveTracked(tl)
}

// track registers ln so that Close closes it and the connections it accepts.
func (s *Server) track(ln net.Listener) (*trackedListener, error) {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.closed {
		ln.Close()
		return nil, ErrClosed
	}
	tl := &trackedListener{Listener: ln, s: s}
	s.lns = append(s.lns, tl)
	return tl, nil
}

func (s *Server) serveTracked(tl *trackedListener) error {
	err := s.srv.Serve(tl)
	s.lnMu.Lock()
	closed := s.closed
	s.lnMu.Unlock()
	if closed {
		return nil
	}
	return err
}

// Addr returns the address of the first listener, or "" when not serving.
func (s *Server) Addr() string {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if len(s.lns) == 0 {
		return ""
	}
	return s.lns[0].Addr().String()
}

// URL returns "http://" + Addr().
func (s *Server) URL() string {
	return "http://" + s.Addr()
}

// Close stops listening and closes every open connection, streams included:
// later dials are refused. It is safe to call more than once.
func (s *Server) Close() error {
	s.lnMu.Lock()
	if s.closed {
		s.lnMu.Unlock()
		return nil
	}
	s.closed = true
	var err error
	for _, ln := range s.lns {
		if cerr := ln.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.lnMu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	close(s.done) // after the connections: a stream ended by it must not end cleanly
	s.serving.Wait()
	return err
}

// sleep waits for d, or until Close. It reports false after Close.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// SetFault applies f to every following request (to the next f.Times
// requests, when set) until SetFault(Fault{}). A request's own x-sim-fault
// header takes precedence.
func (s *Server) SetFault(f Fault) {
	if f == (Fault{}) {
		s.fault.Store(nil)
		return
	}
	a := &armedFault{f: f}
	a.left.Store(int64(f.Times))
	s.fault.Store(a)
}

// quietLogger drops fasthttp's connection error logs: broken connections are what
// the faults are for.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// trackedListener registers accepted connections so that Close can close them.
type trackedListener struct {
	net.Listener
	s *Server
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s}
	l.s.lnMu.Lock()
	closed := l.s.closed
	if !closed {
		l.s.conns[tc] = struct{}{}
	}
	l.s.lnMu.Unlock()
	if closed {
		c.Close()
		return nil, net.ErrClosed
	}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.lnMu.Lock()
		delete(c.s.conns, c)
		c.s.lnMu.Unlock()
	})
	return c.Conn.Close()
}

// resetConn closes c with an RST where the transport allows it.
func resetConn(c net.Conn) {
	for {
		switch t := c.(type) {
		case *trackedConn:
			c = t.Conn
			continue
		case *net.TCPConn:
			_ = t.SetLinger(0)
		}
		break
	}
	c.Close()
}
