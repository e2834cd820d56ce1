// Package wire reads the HTTP/1.1 framing of a provider's answer where the
// gateway reads it itself instead of fasthttp: the answer's head when it is
// plainly framed (ReadPlainHead into a Head, answerhead.go) and a chunked
// body's framing (ReadChunkSize, ReadCRLF, ChunkBuffered, chunked.go). It
// works on a bufio.Reader and a fasthttp.Response header, knows nothing of
// deployments, routing or relaying, and imports no package of the gateway:
// package upstream, whose transport holds the connection, calls it.
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
//   - A chunked body. A streamed body is read from the connection's
//     bufio.Reader by upstream's answer body, not by fasthttp's streamed
//     path, which wraps each body in a new stream and closures (allocations
//     per call) and hides how much of the answer is already read. Its chunk
//     size lines are bounded as fasthttp bounds them (at most 15 hex digits)
//     and, where fasthttp's are not, in length too (extensions: 4 KiB); a
//     malformed one is ErrBrokenChunk, a body cut inside one
//     io.ErrUnexpectedEOF. ChunkBuffered tells whether the next chunk is
//     whole in the buffer, which fasthttp cannot say: the relay gathers a
//     burst of events, and a stream's last events with the body's end, into
//     one write to the client (docs/performance.md "The upstream read is the
//     gateway's own", "A stream's end in one write").
//
// Trailers, a body read whole and every head it leaves are read by fasthttp's
// public parser (ResponseHeader.Read, ReadTrailer, Response.ReadBody), as
// fasthttp reads them.
package wire
