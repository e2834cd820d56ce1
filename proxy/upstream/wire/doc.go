// Package wire owns the HTTP/1.1 wire towards the providers, one deployment's
// connections at a time: its client (NewClient: fasthttp's HostClient, for
// its connection pool, with the wire's dialer and transport, client.go), the
// dial with its deadlines and TLS (dial.go, openconns.go), the request's
// write (Request, request.go), the round trip on a pooled connection
// (transport.go), the answer's head (ReadHead, and ReadPlainHead into a
// Head, answerhead.go), a streamed answer's body read from the connection's
// bufio.Reader (answer.go) and its chunks' framing (ReadChunkSize, ReadCRLF,
// ChunkBuffered, chunked.go), and Cancel, which ends a call's wait from
// another goroutine (cancel.go). It tells an Observer what the connections
// see (observer.go: when an answer's head came, a pooled connection found
// closed while idle).
//
// It knows nothing of deployments, routing, health or relaying: package
// upstream, whose deployments hold the clients and give them an Observer,
// and whose relay reads the bodies (Ready, Share, Cut, RestFits, PinIdle),
// calls it. It imports no package of the gateway but proxy/rawio, the system
// calls of the gateway's TCP sockets.
//
// Where it reads answers differently from fasthttp (v1.74.0), and why:
//
//   - The head. ReadPlainHead takes only a subset of what fasthttp's parser
//     (ResponseHeader.Read) takes, and reads it the same: HTTP/1.1, a status
//     of 200 to 599 but 204 and 304, CRLF lines, names of token characters,
//     values of the bytes fasthttp allows, neither empty nor ending in white
//     space, none folded, one Content-Length of digits or one
//     Transfer-Encoding: chunked and not both, at most one Connection and one
//     Content-Type, no Trailer, and the head whole in the reader's buffer.
//     Every provider's head is such a head. It walks the bytes once, copies
//     the lines once into the Head, and gives the fasthttp header only the
//     status, the framing, the content type and Connection: close; the relay
//     copies the lines to the client from the Head. fasthttp's parser copies
//     and checks each of a provider's fifteen to twenty headers into the
//     answer's header, and the relay then copied each again into the
//     client's: 2.1 µs of a chat call, against 1.4 µs read here
//     (BenchmarkAnswerHead in package upstream, docs/performance.md "A
//     provider's answer head is read by the transport"). Any other head is
//     left unread, whole, for fasthttp's parser, which then reads it as it
//     would alone; upstream's TestAnswerHeadAsFasthttp,
//     TestAnswerHeadLinesAsFasthttp and FuzzAnswerHeadAsFasthttp hold the two
//     to the same status, framing, content type, close and bytes read.
//     A failure to read the head's first byte is returned as fasthttp's
//     parser returns it: fasthttp.ErrTimeout for a timeout, io.EOF else.
//     ReadHead skips up to eight 1xx answers before the real one, where
//     fasthttp's Response.Read skips a hundred.
//   - A streamed body. It is read from the connection's bufio.Reader by the
//     wire's answer body, not by fasthttp's streamed path, which wraps each
//     body in a new stream and closures (allocations per call) and hides how
//     much of the answer is already read. Its chunk size lines are bounded
//     as fasthttp bounds them (at most 15 hex digits) and, where fasthttp's
//     are not, in length too (extensions: 4 KiB); a malformed one is
//     ErrBrokenChunk, a body cut inside one io.ErrUnexpectedEOF.
//     ChunkBuffered tells whether the next chunk is whole in the buffer,
//     which fasthttp cannot say: the relay gathers a burst of events, and a
//     stream's last events with the body's end, into one write to the client
//     (docs/performance.md "The upstream read is the gateway's own", "A
//     stream's end in one write"). An event stream's body moves to a 2 KiB
//     reader once its head is read ("An idle stream's upstream reader"),
//     which it gives back to its pool while it waits for the next chunk on a
//     plain TCP connection: the wait is rawio's, a peek that reads nothing
//     ("An idle stream holds no reader"), or, for a caller that can go on
//     without a goroutine (Park), no wait at all: the connection is parked
//     in rawio's epoll set until its next bytes ("An idle stream holds no
//     goroutine").
//
// Trailers, a body read whole and every head it leaves are read by fasthttp's
// public parser (ResponseHeader.Read, ReadTrailer, Response.ReadBody), as
// fasthttp reads them.
//
// Where it writes, dials and waits differently from fasthttp's client, and
// why (fasthttp still pools the connections: AcquireConn, ReleaseConn,
// CloseConn, the bound on connections, the wait for one, idle timeout):
//
//   - The request. fasthttp would serialise a fasthttp.Request; the
//     transport writes a Request's Head and Body as they stand, built in
//     one pass by the caller (docs/performance.md "The upstream request's
//     head is written, not built"). fasthttp is given an empty request whose
//     body stream leads back to the Request; any other request is refused.
//     The write and the wait for the answer are one (flushAwait, "The answer
//     is awaited, not read for").
//   - The deadlines. fasthttp's ReadTimeout would bound a whole streamed
//     body, and its WriteTimeout a whole request; the connection owns its
//     deadlines instead and ignores fasthttp's: an answer's head must come
//     within the first-byte timeout of the request's write, each later read
//     within the idle timeout (a body not asked for as a stream, whole
//     within it), and each 256 KiB piece of a request must be taken within
//     the write timeout.
//   - Failover. fasthttp never sends a call again (MaxIdemponentCallAttempts
//     1): whether a call goes again is package upstream's. Stale tells a
//     call that failed on a pooled connection the upstream had closed, and
//     Request.Do's fresh sends the next one on a connection dialled for it;
//     a pooled connection idle for more than a second is looked at
//     (closedWhileIdle, one recv(2) of MSG_PEEK) and replaced before any
//     byte of a request is written on it.
//   - TLS. The dialer speaks it (tls.Config from the deployment), not
//     fasthttp's IsTLS, below the connection that owns the deadlines, so
//     that they and the idle check see the TCP connection whatever the
//     scheme.
//   - Cancel. fasthttp has no way to end a call from another goroutine; a
//     Cancel moves the attached connection's read deadline to the past,
//     which wakes the read that waits, and the call's goroutine closes the
//     connection. No goroutine or timer waits for it.
package wire
