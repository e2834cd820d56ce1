package wire

import (
	"bufio"
	"io"
	"net"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/rawio"
)

// answerBody is a streamed answer's body, read from the connection's
// bufio.Reader: of known length, chunked, or up to the connection's close.
// The read that reaches the body's end hands the connection back to the
// pool (unless somebody asked to close it), before the relay writes the last
// bytes to the client: the client's next call finds it there. Close of a body
// not read to its end closes the connection, which cancels the upstream call.
// Read and Close are called from one goroutine at a time: the relay's, or a
// read-ahead's while it is shared (see Share); Cut may come from the relay's
// meanwhile.
type answerBody[C conn] struct {
	t    *transport[C]
	hc   *fasthttp.HostClient
	cc   C
	br   *bufio.Reader
	resp *fasthttp.Response
	// small says that br is an event stream's reader from sseReaders, which
	// src fills (see shrink), and not the connection's from hc.
	small bool
	src   carry
	// length is fasthttp's: >= 0 known, -1 chunked, -2 up to the close.
	length int
	left   int64 // of the known length, or of the chunk being read
	done   bool  // read to its end
	// awaitErr is the error the wait of Await met, which the next read
	// returns.
	awaitErr  error
	closeConn bool
	// cancel, when not nil, has the connection attached until the body
	// lets it go (see Cancel).
	cancel *Cancel
	// shared is set while a read-ahead reads the body on a goroutine of its
	// own (see package upstream's readAhead); the relay's goroutine may
	// then Cut the connection. end and Cut agree under mu on who lets it
	// go: Cut closes it unless end has released it, and end then closes it
	// too.
	shared bool
	mu     sync.Mutex
	isCut  bool
	// parkedOn is the connection the body parked on (see Park), until it
	// lets the connection go: its socket leaves the parker's set then.
	parkedOn *rawio.Conn
}

// Read reads the next bytes of the body.
func (b *answerBody[C]) Read(p []byte) (int, error) {
	if b.br == nil && b.parkedOn != nil && !b.done {
		b.afterPark() // read after a park without Await
	}
	switch {
	case b.done:
		return 0, io.EOF
	case b.length == -1:
		return b.readChunked(p)
	case b.length == -2:
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.end()
		}
		return n, err
	}
	if b.left == 0 {
		b.end()
		return 0, io.EOF
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	switch {
	case b.left == 0:
		b.end()
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// readChunked reads a chunked body: a size line when a chunk is due, then
// its data; the read that ends a chunk's data also reads its CRLF.
func (b *answerBody[C]) readChunked(p []byte) (int, error) {
	if b.left == 0 {
		if err := b.awaitErr; err != nil {
			b.awaitErr = nil
			return 0, err
		}
		size, err := ReadChunkSize(b.br)
		if err != nil {
			return 0, err
		}
		if size == 0 {
			if err := b.resp.Header.ReadTrailer(b.br); err != nil && err != io.EOF {
				return 0, err
			}
			b.end()
			return 0, io.EOF
		}
		b.left = size
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	if err == nil && b.left == 0 {
		err = ReadCRLF(b.br)
	}
	return n, err
}

// Await waits until the next Read returns without waiting for the network,
// with what the connection brought or the error its read met, and reports
// whether it could: only a chunked body, between its chunks, waits so (see
// await: without a reader over plain TCP, else in a read into the body's own
// reader). The caller of an event stream then needs no buffer of its own
// while the stream idles, and reads what came in one Read.
func (b *answerBody[C]) Await() bool {
	if b.done || b.length != -1 || b.left != 0 {
		return false
	}
	if b.br == nil {
		b.afterPark()
		return true
	}
	if b.awaitErr == nil && b.br.Buffered() == 0 {
		if err := b.await(); err != nil {
			b.awaitErr = chunkErr(err) // as ReadChunkSize's
		}
	}
	return true
}

// Park is Await without a goroutine: where Await would wait without a reader
// (an event stream's, over plain TCP, between its chunks), it gives the
// reader back, arms the read's deadline as the wait would, and parks the
// connection (rawio.Conn.Park), whose Wake calls w once the next bytes come,
// the deadline passes or Cancel comes. It reports whether it parked; the
// caller then must not touch the body until w's Wake, after which Await takes
// a reader again, waits no more when the bytes came, and else waits as ever
// (the deadline or the cancel returns at once). False, the caller goes on as
// without Park.
func (b *answerBody[C]) Park(w rawio.Waker) bool {
	if b.done || b.length != -1 || b.left != 0 || !b.small || b.br == nil || b.awaitErr != nil || b.br.Buffered() != 0 {
		return false
	}
	dc, ok := b.src.c.(*deadlineConn)
	if !ok {
		return false
	}
	rc, ok := dc.Conn.(*rawio.Conn)
	if !ok {
		return false
	}
	if !dc.awaitArmed {
		if dc.armRead() != nil {
			return false // Await meets it again, and returns it
		}
		dc.awaitArmed = true // the Read after the park keeps the deadline, as after await's wait
	}
	b.br.Reset(nil)
	sseReaders.Put(b.br)
	b.br, b.parkedOn = nil, rc
	// After the deadline: a Cancel sets canceled before it kicks the park,
	// so either this sees it, or the Kick ends the park.
	if dc.canceled.Load() || !rc.Park(dc.deadline, w) {
		b.unparked(false) // Await waits as ever
		return false
	}
	return true
}

// afterPark goes on after a park's Wake: a reader again, and Await's wait
// unless the park ended because the bytes came.
func (b *answerBody[C]) afterPark() { b.unparked(!b.parkedOn.WokeReady()) }

// unparked takes a reader again after a park (see Park) and, when wait is
// set (the park did not end because the bytes came), waits as Await does:
// a deadline passed or a cancel returns at once.
func (b *answerBody[C]) unparked(wait bool) {
	b.br = sseReaders.Get().(*bufio.Reader)
	b.br.Reset(&b.src)
	if wait && b.awaitErr == nil {
		if err := b.await(); err != nil {
			b.awaitErr = chunkErr(err)
		}
	}
}

// await is Await's wait for the next chunk. An event stream's small reader
// goes back to its pool for the wait, when the connection under the body's
// can be waited on without a read (a plain TCP one; under TLS, its reader
// may hold what the socket no longer does), and one is taken again after
// it: an idle stream then holds no reader at all, only its connection, and
// the reader an event is read through is the one the last event on this P
// used, still in the cache, not the stream's own, which a thousand other
// streams' events have pushed out of it. Else the wait is a read into the
// body's reader.
//
// The connection is the one the small reader reads from (src's), not asked
// of fasthttp's handle: that is one more object an event would load, cold
// under a thousand streams.
func (b *answerBody[C]) await() error {
	if dc, ok := b.src.c.(*deadlineConn); ok && b.small {
		if rc, ok := dc.Conn.(readyAwaiter); ok {
			b.br.Reset(nil)
			sseReaders.Put(b.br)
			b.br = nil
			err := dc.awaitRead(rc)
			b.br = sseReaders.Get().(*bufio.Reader)
			b.br.Reset(&b.src)
			return err
		}
	}
	_, err := b.br.Peek(1)
	return err
}

// sseReaderSize is the buffer an event stream's body is read through once its
// head is read. The connection's reader (the deployment client's
// ReadBufferSize, 8 KiB) is sized for an answer's head. Over a plain TCP
// connection the body holds the reader only while an event is read: it goes
// back to sseReaders while the stream waits (see await). Under TLS the wait
// is a read into it, and it is held for the stream's life. Its events are
// small, and a read larger than the buffer
// goes around it (bufio.Reader reads straight into the caller's slice when
// its own is empty). A burst of events larger than the buffer can still take
// one more read and write: at 1 KiB the harness's streams made up to 0.06
// more of each per stream; at 2 KiB, as many as with 8 KiB.
const sseReaderSize = 2 << 10

var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sseReaderSize) }}

// carry is what an event stream's small reader reads from: what the head's
// reader still holds, then the connection.
type carry struct {
	br *bufio.Reader
	c  net.Conn
}

func (s *carry) Read(p []byte) (int, error) {
	if s.br != nil {
		if n := s.br.Buffered(); n > 0 {
			return s.br.Read(p[:min(len(p), n)])
		}
	}
	return s.c.Read(p)
}

// shrink moves an event stream's body from the connection's reader to a
// small one of sseReaders, with the bytes the first one holds past the head,
// and gives the first one back. Holding more than the small one takes, the
// body stays where it is.
func (b *answerBody[C]) shrink(c net.Conn) {
	n := b.br.Buffered()
	if n > sseReaderSize {
		return
	}
	small := sseReaders.Get().(*bufio.Reader)
	b.src = carry{br: b.br, c: c}
	small.Reset(&b.src)
	if n > 0 {
		// Within the buffer's size, Peek fills it from src until it holds n
		// bytes: all of them from the head's reader, none from c.
		if _, err := small.Peek(n); err != nil {
			small.Reset(nil)
			sseReaders.Put(small)
			b.src = carry{}
			return
		}
	}
	b.hc.ReleaseReader(b.br)
	b.src.br = nil
	b.br, b.small = small, true
}

// readerSize is the size of the buffer the body is read through.
func (b *answerBody[C]) readerSize() int { return b.br.Size() }

// releaseReader gives the body's reader back to the pool it came from.
func (b *answerBody[C]) releaseReader() {
	if !b.small {
		b.hc.ReleaseReader(b.br)
		return
	}
	b.br.Reset(nil)
	sseReaders.Put(b.br)
	b.small, b.src = false, carry{}
}

// end marks the body read to its end and lets its connection go: back to
// the pool, unless the request or the answer asked to close it.
func (b *answerBody[C]) end() {
	if b.shared {
		b.mu.Lock()
		defer b.mu.Unlock()
	}
	b.done = true
	b.releaseReader()
	b.br = nil
	b.unpark()
	// Shared, the answer's header is not read: the relay may be setting it
	// (see Share).
	if b.cancel.detach() || b.closeConn || b.isCut || (!b.shared && b.resp.ConnectionClose()) {
		b.t.close(b.hc, b.cc)
	} else {
		b.t.release(b.hc, b.cc)
	}
}

// unpark takes the connection out of the parker's set, once the body lets
// it go (to the pool, or closed).
func (b *answerBody[C]) unpark() {
	if b.parkedOn != nil {
		b.parkedOn.Unpark()
		b.parkedOn = nil
	}
}

// Share readies the body to be read by a read-ahead's goroutine: end then
// decides on the Connection: close asked for until now.
func (b *answerBody[C]) Share() {
	b.closeConn = b.closeConn || b.resp.ConnectionClose()
	b.shared = true
}

// Unshare ends Share, once the read-ahead's goroutine is done.
func (b *answerBody[C]) Unshare() { b.shared = false }

// Cut closes the connection of a body a read-ahead reads, which ends the
// read it waits in, unless the body was read to its end and its connection
// let go.
func (b *answerBody[C]) Cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && !b.isCut {
		b.isCut = true
		b.cc.Conn().Close()
	}
}

// RestFits reports whether the rest of the body may fit in n bytes: its
// length is unknown, or at most n.
func (b *answerBody[C]) RestFits(n int) bool {
	return !b.done && (b.length < 0 || b.left <= int64(n))
}

// Close ends the body: one not read to its end closes its connection (end
// let the connection of one read whole go already).
func (b *answerBody[C]) Close() error {
	if !b.done {
		if b.br != nil {
			b.releaseReader()
		} else {
			b.small, b.src = false, carry{}
		}
		b.unpark()
		b.cancel.detach()
		b.t.close(b.hc, b.cc)
	}
	var zero C
	b.hc, b.cc, b.br, b.resp, b.cancel, b.awaitErr = nil, zero, nil, nil, nil, nil
	b.shared, b.isCut = false, false
	b.t.bodies.Put(b)
	return nil
}

// Ready reports whether the next Read returns data without waiting for the
// network: some of the body is buffered, and for a chunked body the read
// does not need more than is buffered (the rest of the chunk being read is
// either not all there, so the read stops short of its CRLF, or there with
// its CRLF; or a whole next chunk is).
func (b *answerBody[C]) Ready() bool {
	if b.done || b.br == nil {
		return false
	}
	n := b.br.Buffered()
	switch {
	case n == 0:
		return false
	case b.length != -1:
		return true
	case b.left > 0:
		return int64(n) < b.left || int64(n) >= b.left+2
	}
	p, _ := b.br.Peek(n) // n is buffered: does not wait
	return ChunkBuffered(p)
}
