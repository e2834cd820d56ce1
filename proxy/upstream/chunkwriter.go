package upstream

import (
	"bufio"
	"io"
	"reflect"
	"sync"
)

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
// chunk in one write. fasthttp does not expose the writer: its place is
// found by reflection once per process and checked; if fasthttp ever lays
// it out otherwise, the relay flushes every chunk, and TestChunkWriterLayout
// fails loudly.
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
