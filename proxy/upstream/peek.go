package upstream

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"sync"
	"unsafe"
)

// upstreamPeek looks into the read buffer under a streamed upstream body,
// so that the relay can tell whether the next chunk is already there: a relay
// that writes each upstream chunk to the client at once costs one write per
// event even when a whole burst of events came in one read, where a proxy on
// an event loop sends what it has in one go. With it, the relay gathers every
// chunk that can be read without waiting and writes them together, and never
// holds an event while it waits for the network.
//
// fasthttp does not expose the buffer, so its place is found by reflection
// on the stream fasthttp hands out (a clientStreamBody around a
// requestStream), once per process, and checked field by field; if fasthttp
// ever lays them out otherwise, ok stays false and the relay writes each
// chunk as it is read. TestUpstreamPeekLayout fails loudly in that case.
type upstreamPeek struct {
	br            *bufio.Reader
	chunkLeft     *int // data bytes left of the chunk being read
	contentLength *int // -1: chunked; >= 0: fixed; else read to close
}

// streamLayout is where the fields of fasthttp's stream types lie.
var streamLayout struct {
	once      sync.Once
	ok        bool
	outer     reflect.Type // *clientStreamBody
	inner     reflect.Type // *requestStream
	readerIdx int          // clientStreamBody.reader (io.Reader)
	brIdx     int          // requestStream.reader (*bufio.Reader)
	chunkIdx  int          // requestStream.chunkLeft (int)
	lengthIdx int          // requestStream.contentLength (int)
}

func learnStreamLayout(stream io.Reader) {
	l := &streamLayout
	outer := reflect.TypeOf(stream)
	if outer == nil || outer.Kind() != reflect.Pointer || outer.Elem().Kind() != reflect.Struct {
		return
	}
	rf, ok := outer.Elem().FieldByName("reader")
	if !ok || rf.Type != reflect.TypeFor[io.Reader]() || len(rf.Index) != 1 {
		return
	}
	inner := reflect.ValueOf(stream).Elem().Field(rf.Index[0]).Elem()
	if !inner.IsValid() || inner.Kind() != reflect.Pointer || inner.Elem().Kind() != reflect.Struct {
		return
	}
	field := func(name string, want reflect.Type) (int, bool) {
		f, ok := inner.Type().Elem().FieldByName(name)
		if !ok || f.Type != want || len(f.Index) != 1 {
			return 0, false
		}
		return f.Index[0], true
	}
	var okBR, okChunk, okLen bool
	l.brIdx, okBR = field("reader", reflect.TypeFor[*bufio.Reader]())
	l.chunkIdx, okChunk = field("chunkLeft", reflect.TypeFor[int]())
	l.lengthIdx, okLen = field("contentLength", reflect.TypeFor[int]())
	if !okBR || !okChunk || !okLen {
		return
	}
	l.outer, l.inner, l.readerIdx, l.ok = outer, inner.Type(), rf.Index[0], true
}

// peekUpstream returns the view into stream's buffer, if fasthttp's layout
// is the one learnt.
func peekUpstream(stream io.Reader) (upstreamPeek, bool) {
	l := &streamLayout
	l.once.Do(func() { learnStreamLayout(stream) })
	if !l.ok || reflect.TypeOf(stream) != l.outer {
		return upstreamPeek{}, false
	}
	inner := reflect.ValueOf(stream).Elem().Field(l.readerIdx).Elem()
	if !inner.IsValid() || inner.Type() != l.inner || inner.IsNil() {
		return upstreamPeek{}, false
	}
	s := inner.Elem()
	br := (*bufio.Reader)(s.Field(l.brIdx).UnsafePointer())
	if br == nil {
		return upstreamPeek{}, false
	}
	return upstreamPeek{
		br:            br,
		chunkLeft:     (*int)(unsafe.Pointer(s.Field(l.chunkIdx).UnsafeAddr())),
		contentLength: (*int)(unsafe.Pointer(s.Field(l.lengthIdx).UnsafeAddr())),
	}, true
}

// ready reports whether the next read of the stream returns data without
// waiting for the network: for a chunked body, the rest of the current chunk
// or a whole next one (with its closing CRLF) is buffered.
func (p *upstreamPeek) ready() bool {
	n := p.br.Buffered()
	if n == 0 {
		return false
	}
	if *p.contentLength != -1 {
		return true // a buffered read of a fixed or close-delimited body does not wait
	}
	if left := *p.chunkLeft; left > 0 {
		return n >= left+2
	}
	b, _ := p.br.Peek(n) // n <= Buffered: does not wait
	return chunkBuffered(b)
}

// chunkBuffered reports whether b starts with a whole non-final chunk: its
// size line, data and CRLF. The final chunk counts as not ready: it ends
// the body, and the relay has nothing to gather after it.
func chunkBuffered(b []byte) bool {
	size, i := 0, 0
	for ; i < len(b); i++ {
		c := b[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto sizeEnd
		}
		if i >= 8 { // above any chunk the relay would gather
			return false
		}
		size = size<<4 | int(d)
	}
sizeEnd:
	if i == 0 || size == 0 {
		return false
	}
	for ; i < len(b) && b[i] != '\n'; i++ { // extensions, up to the CRLF
	}
	// b[i] is the size line's '\n'; then size bytes of data and CRLF.
	return i < len(b) && len(b)-(i+1) >= size+2
}

// ended reports whether the rest of a chunked body is its final chunk, whole
// in the buffer (without trailers): the next read returns the end of the body
// without waiting.
func (p *upstreamPeek) ended() bool {
	if *p.contentLength != -1 || *p.chunkLeft != 0 {
		return false
	}
	b, _ := p.br.Peek(p.br.Buffered())
	return bytes.HasPrefix(b, lastChunk)
}

var lastChunk = []byte("0\r\n\r\n")

// chunkWriterLayout is where fasthttp's chunked body writer keeps the
// connection's buffered writer.
var chunkWriterLayout struct {
	once sync.Once
	typ  reflect.Type // *chunkedBodyWriter
	idx  int          // its w (*bufio.Writer)
	ok   bool
}

// chunkWriter returns the buffered writer under the chunk writer fasthttp
// hands to WriteTo, or nil. Writing the chunks there lets the relay choose
// when to flush: only before it may wait for the upstream, and not before
// the end of the body, whose last data then leaves with fasthttp's final
// chunk in one write. Found and checked like upstreamPeek.
func chunkWriter(w io.Writer) *bufio.Writer {
	l := &chunkWriterLayout
	l.once.Do(func() {
		t := reflect.TypeOf(w)
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().Name() != "chunkedBodyWriter" {
			return
		}
		f, ok := t.Elem().FieldByName("w")
		if !ok || f.Type != reflect.TypeFor[*bufio.Writer]() || len(f.Index) != 1 {
			return
		}
		l.typ, l.idx, l.ok = t, f.Index[0], true
	})
	if !l.ok || reflect.TypeOf(w) != l.typ {
		return nil
	}
	return (*bufio.Writer)(reflect.ValueOf(w).Elem().Field(l.idx).UnsafePointer())
}

// writeChunk frames p as one chunk of a chunked body into bw, unflushed.
func writeChunk(bw *bufio.Writer, p []byte) error {
	shift := 0
	for len(p)>>shift > 0xf {
		shift += 4
	}
	for ; shift >= 0; shift -= 4 {
		bw.WriteByte(hexDigits[len(p)>>shift&0xf])
	}
	bw.WriteString("\r\n")
	bw.Write(p)
	_, err := bw.WriteString("\r\n")
	return err
}
