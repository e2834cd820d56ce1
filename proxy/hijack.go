package proxy

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/clientconn"
)

// A streamed SSE answer is written from a goroutine of its own once its head
// is decided, not from inside fasthttp's serving of the connection.
//
// fasthttp writes a streamed body from the goroutine that serves the
// connection, through the connection's write buffer (4 KiB), on a stack that
// the handler has grown to 8 KiB by then: both are held for the whole
// stream, seconds to minutes, for a few hundred bytes every few tens of
// milliseconds. So the handler hijacks the connection instead
// (HijackSetNoResponse): fasthttp lets go of the write buffer and the
// goroutine, and runs the hijack handler, heldStream.serve, on a new
// goroutine. fasthttp frees the connection's read buffer (8 KiB) and the
// RequestCtx only once that handler returns, so serve takes what the reader
// holds past the stream's request, detaches the connection from fasthttp's
// Close (clientconn.Conn.Detach), hands the stream to a resumer (a goroutine
// that runs streams' steps, see package resume) and returns. Between its
// events a stream holds no goroutine at all: where it would wait for its
// upstream's next bytes, the upstream connection is parked
// (rawio.Conn.Park) and the park's Wake hands the stream to a resumer again
// (see relay). An idle stream is then its state on the heap and its two
// sockets, not a goroutine's stack (4 KiB at least) as well. The call no
// longer has the RequestCtx from then on (call.dropRequestCtx). The stream writes the head
// fasthttp would have written, byte for byte (its bytes built by fasthttp
// from the response, with the answer's lines spliced in: see
// clientconn.Conn.SpliceHead), then each relayed write of events as one
// chunk, then the chunked body's end, each in one write to the client's
// connection, whose idle write deadline, held tail and client-gone watch
// work as they do for fasthttp's writes.
//
// Once the stream ends whole, the connection is served again
// (Server.ServeConn, from the stream's goroutine) unless it closes as
// fasthttp would close it: the head said Connection: close, a write failed
// or the relay failed, or the gateway is shutting down. A request the client
// sent behind the stream's (pipelining) and that the server's reader held
// is read first (see clientconn.Conn.TakeBuffered); else the next request's
// first bytes are awaited as fasthttp awaits a kept-alive connection's,
// idle, and closed quietly at the idle timeout or a shutdown (see
// awaitRequest). A second stream on the connection hijacks it again.
//
// A shutdown waits for these streams as fasthttp's waits for the requests it
// serves (Gateway.WaitStreams).

// streamConns are the client connections whose streams are written outside
// fasthttp's serving (see above): the server that serves each again once
// its stream ends, and the count of those streams, which a shutdown waits
// for. The zero value is ready; safe for concurrent use.
type streamConns struct {
	srv  atomic.Pointer[fasthttp.Server]
	many atomic.Bool // more than one server: streams stay in fasthttp's hands

	mu      sync.Mutex
	open    int           // streams being written
	idle    chan struct{} // closed once open is 0, while a shutdown waits
	closing bool          // a shutdown waits: connections are not served again
	// waiting are the connections whose next request is awaited after a
	// stream (see awaitRequest); a shutdown closes them.
	waiting map[*clientconn.Conn]struct{}
}

// serveWith notes the server that serves the gateway's client connections.
// A gateway with more than one server writes its streams within fasthttp:
// which one a connection came from is not known.
func (s *streamConns) serveWith(srv *fasthttp.Server) {
	if !s.srv.CompareAndSwap(nil, srv) {
		s.many.Store(true)
	}
}

// server returns the server that serves the client connections again, or
// nil when streams are not hijacked.
func (s *streamConns) server() *fasthttp.Server {
	if s.many.Load() {
		return nil
	}
	return s.srv.Load()
}

// begin counts a stream in, unless a shutdown waits.
func (s *streamConns) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.open++
	return true
}

// end counts a stream out, and reports whether its connection may be served
// again.
func (s *streamConns) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.open == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	return !s.closing
}

// wait serves no connection again once its stream ends, and waits until
// no stream is written, or ctx is done.
func (s *streamConns) wait(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for cc := range s.waiting {
		cc.Close() // its awaitRequest fails
	}
	if s.open == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitRequest waits, for the server's idle timeout at most, for the first
// bytes of the client's next request after a stream, and reports whether
// they came: they are then the first read of the connection served again.
// fasthttp waits for a kept-alive connection's next request before it
// counts the connection busy, so that a shutdown closes it while it idles,
// and a client that leaves it gets no answer; it serves a connection given
// to it as one whose first request is being read. So the wait is made here,
// and a shutdown closes the connections waiting (see wait).
func (s *streamConns) awaitRequest(cc *clientconn.Conn, srv *fasthttp.Server) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	if s.waiting == nil {
		s.waiting = make(map[*clientconn.Conn]struct{})
	}
	s.waiting[cc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, cc)
		s.mu.Unlock()
	}()
	idle := srv.IdleTimeout
	if idle <= 0 {
		idle = srv.ReadTimeout
	}
	if idle > 0 && cc.SetReadDeadline(time.Now().Add(idle)) != nil {
		return false
	}
	return cc.ReadNext()
}

// WaitStreams is for a shutdown, after the server's: the streams written
// outside the server (see hijack.go) are not the server's to wait for. It
// waits until they end, or ctx is done, and their connections close after
// them.
func (g *Gateway) WaitStreams(ctx context.Context) error { return g.streams.wait(ctx) }

// hijackStream has the streamed answer whose relay is ready written by a
// heldStream (see above), and reports whether it will be; size is the
// body's size as Stream gave it. Only an SSE stream over a client connection
// of the gateway's listener is, to an HTTP/1.1 request other than HEAD,
// while the gateway does not drain: the others are fasthttp's to write.
func (c *call) hijackStream(size int) bool {
	cc, ok := c.ctx.Conn().(*clientconn.Conn)
	if !ok || size != -1 || !c.up.SSE() || c.ctx.IsHead() || !c.ctx.Request.Header.IsHTTP11() ||
		c.g.obs.draining.Load() {
		return false
	}
	if c.ctx.Request.IsBodyStream() && !c.bodyDone {
		return false // the reader holds the body's rest: not a request behind the stream
	}
	srv := c.g.streams.server()
	if srv == nil || srv.KeepHijackedConns || !c.g.streams.begin() {
		return false
	}
	hs := acquireHeldStream()
	hs.c, hs.cc, hs.srv = c, cc, srv
	hs.keep = c.streamHead(cc, hs)
	hs.flushHead = c.ctx.Response.ImmediateHeaderFlush
	c.ctx.HijackSetNoResponse(true)
	c.ctx.Hijack(hs.run)
	return true
}

// streamHead puts in hs.head the head fasthttp would write for the streamed
// answer in the call's response, and reports whether the connection is kept
// alive after it: fasthttp's choice, but for a shutdown, which hijackStream
// left to fasthttp.
func (c *call) streamHead(cc *clientconn.Conn, hs *heldStream) (keep bool) {
	h := &c.ctx.Response.Header
	keep = !c.ctx.Request.Header.ConnectionClose() && !h.ConnectionClose()
	if !keep {
		h.SetConnectionClose()
	}
	h.SetContentLength(-1) // chunked, as fasthttp writes a stream of unknown size
	hs.head = clientconn.AcquireHeadBuffer()
	*hs.head = cc.SpliceHead(h.AppendBytes((*hs.head)[:0]))
	return keep
}

// heldStream writes a hijacked stream (see above). It is the io.Writer the
// relay writes its events to: each write leaves as one chunk. Pooled: taken
// by hijackStream, put back by write.
type heldStream struct {
	c         *call
	cc        *clientconn.Conn
	srv       *fasthttp.Server
	head      *[]byte // the answer's head, until it is written (clientconn.AcquireHeadBuffer)
	flushHead bool    // the head leaves at once, not with the first events
	keep      bool    // the head did not say Connection: close
	taken     bool    // the bytes the server's reader held past the request were taken
	started   bool    // the relay began: the head left when flushHead asked
	run       func(net.Conn)
}

var heldStreamPool sync.Pool

func acquireHeldStream() *heldStream {
	if hs, ok := heldStreamPool.Get().(*heldStream); ok {
		return hs
	}
	hs := new(heldStream)
	// Made once: the hijack handler costs no closure a stream.
	hs.run = hs.serve
	return hs
}

// serve is the hijack handler. It hands the stream to a goroutine of its
// own and returns at once, so that fasthttp frees the request's reader
// (8 KiB, back to the server's pool), the RequestCtx and the hijacked
// connection's wrapper while the stream lasts. Before that, it keeps what
// the reader holds past the stream's request (a request the client
// pipelined behind it; the request's body was read whole), and lets the
// stream keep the connection: fasthttp's Close of it once serve returns
// does nothing (clientconn.Conn.Detach). The call lets go of the
// RequestCtx: fasthttp serves another request with it from now on.
func (hs *heldStream) serve(conn net.Conn) {
	hs.c.dropRequestCtx()
	hs.c.dropBodies()
	hs.taken = hs.cc.TakeBuffered(conn)
	hs.cc.Detach()
	resumeStream(hs)
}

// writeStream writes the stream, ends the call, and then serves the
// connection again when it is kept alive, else closes it. Served again, it
// is a new clientconn.Conn (HandOver), and the one the stream wrote through
// is left a shell whose Close does not close the socket, which may be
// another stream's by then (a second stream hijacks it, and ServeConn
// returns).
func (hs *heldStream) writeStream() {
	g := hs.c.g
	whole, parked := hs.relay()
	if parked {
		return // its Wake goes on (see relay)
	}
	keep, cc, srv := hs.keep && whole && hs.taken, hs.cc, hs.srv
	hs.c, hs.cc, hs.srv, hs.started = nil, nil, nil, false
	heldStreamPool.Put(hs)
	cc.Attach() // fasthttp's Close after serve has come: the next one closes
	if g.streams.end() && keep {
		// The wait for the next request takes up to the idle timeout, and
		// serving it as long as the client keeps the connection: not a
		// resumer's to block on (see package resume).
		go g.serveAgain(cc, srv)
		return
	}
	cc.Close()
}

// serveAgain serves a kept-alive connection again after its stream, once
// its next request came, unless the gateway drains.
func (g *Gateway) serveAgain(cc *clientconn.Conn, srv *fasthttp.Server) {
	if (cc.NextBuffered() || g.streams.awaitRequest(cc, srv)) && !g.obs.draining.Load() {
		if next := cc.HandOver(); next != nil {
			cc.Close()          // the shell: the socket is next's
			srv.ServeConn(next) // it closes next, unless a stream hijacks it
			return
		}
	}
	cc.Close()
}

// dropRequestCtx lets go of the RequestCtx, and of what the call took from
// it without a copy, once fasthttp may serve another request with it (see
// heldStream.serve): a use after that is a nil dereference, never a read
// of another client's request.
func (c *call) dropRequestCtx() { c.ctx, c.group, c.version = nil, nil, "" }

// relay writes the head and the body, then ends the call, and reports
// whether the stream was written whole; or it reports parked: the stream
// waits for its upstream's next bytes with no goroutine (see
// upstream.Relay.RelayEvents), and its Wake runs writeStream again, on a
// resumer, to go on from there. Until then nothing of the stream may be
// touched: the Wake may have come already. A panic in the relay ends the
// call as fasthttp's recovery of a body stream's would, and the connection
// closes.
func (hs *heldStream) relay() (whole, parked bool) {
	c := hs.c
	defer func() {
		if v := recover(); v != nil {
			c.g.log.Error("BUG: stream relay panicked", "panic", panicSummary(v))
			whole, parked = false, false
		}
		if !parked {
			hs.dropHead()
			c.Close()
		}
	}()
	if !hs.started {
		hs.started = true
		if hs.flushHead && hs.writeHead() != nil {
			return false, false
		}
	}
	_, parked, err := c.up.RelayEvents(hs, hs)
	if parked || err != nil {
		return false, parked
	}
	return hs.writeEnd() == nil, false
}

// Wake goes on with a parked stream (see relay): from the parker's
// goroutine, a timer's or a cancel's, which must not block.
func (hs *heldStream) Wake() { resumeStream(hs) }

// chunkFraming is the most a chunk's framing takes: its size in hex, CRLF
// after it and after the chunk.
const chunkFraming = 16 + 4

// Write writes p as one chunk, after the head when it has not left yet, in
// one write to the client's connection.
func (hs *heldStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // an empty chunk would end the body
	}
	bp := clientconn.AcquireWriteBuffer()
	defer clientconn.ReleaseWriteBuffer(bp)
	b := (*bp)[:0]
	if hs.head != nil {
		if len(*hs.head)+len(p)+chunkFraming > cap(b) {
			if err := hs.writeHead(); err != nil {
				return 0, err
			}
		} else {
			b = append(b, *hs.head...)
			hs.dropHead()
		}
	}
	b = strconv.AppendUint(b, uint64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	b = append(b, "\r\n"...)
	_, err := hs.cc.Write(b) // a b grown past the pooled buffer is not pooled
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// lastChunk ends a chunked body that has no trailer.
var lastChunk = []byte("0\r\n\r\n")

// writeEnd writes the chunked body's end, after the head when the stream
// had no body.
func (hs *heldStream) writeEnd() error {
	if hs.head != nil {
		*hs.head = append(*hs.head, lastChunk...)
		return hs.writeHead()
	}
	_, err := hs.cc.Write(lastChunk)
	return err
}

// writeHead writes the head alone.
func (hs *heldStream) writeHead() error {
	_, err := hs.cc.Write(*hs.head)
	hs.dropHead()
	return err
}

func (hs *heldStream) dropHead() {
	if hs.head != nil {
		clientconn.ReleaseHeadBuffer(hs.head)
		hs.head = nil
	}
}
