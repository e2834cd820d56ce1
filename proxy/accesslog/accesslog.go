package accesslog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Format is the shape of a line: that of slog's TextHandler or JSONHandler.
type Format uint8

const (
	// Text is key=value pairs, as slog.TextHandler writes them.
	Text Format = iota
	// JSON is one object per line, as slog.JSONHandler writes it.
	JSON
)

// Log writes access lines. Make one with New or FromSlog: the zero Log is not
// usable, and a nil *Log is off (Begin returns nil). Safe for concurrent use;
// lines are written whole, one at a time, each with one Write as its call
// ends (nothing is held back: a crash loses no written line).
type Log struct {
	mu   sync.Mutex // serializes Writes, as slog's handlers do
	w    io.Writer
	json bool
	// slog, when set, receives each line instead: FromSlog.
	slog *slog.Logger
}

// New returns a Log writing lines in format f to w.
func New(w io.Writer, f Format) *Log {
	return &Log{w: w, json: f == JSON}
}

// FromSlog returns a Log that hands each line to l as a record at level Info,
// or nil when l is nil. Its lines cost what slog costs; New's cost less.
func FromSlog(l *slog.Logger) *Log {
	if l == nil {
		return nil
	}
	return &Log{slog: l}
}

// Line is one line being built: Log.Begin it, add its attributes, End it.
// The zero Line is not usable; its methods must not be called after End. Not
// safe for concurrent use.
type Line struct {
	log   *Log
	buf   []byte
	attrs []slog.Attr // the attributes for a FromSlog Log
	msg   string
}

// maxPooledLine bounds the buffer a Line keeps in the pool, so that one huge
// value does not pin its memory for good.
const maxPooledLine = 16 << 10

var linePool = sync.Pool{New: func() any {
	return &Line{buf: make([]byte, 0, 1024), attrs: make([]slog.Attr, 0, 24)}
}}

// Begin starts a line at level Info with message msg, timed now. It returns
// nil when l is nil or its slog.Logger does not log Info.
func (l *Log) Begin(msg string) *Line {
	if l == nil {
		return nil
	}
	if l.slog != nil {
		if !l.slog.Enabled(context.Background(), slog.LevelInfo) {
			return nil
		}
		ln := linePool.Get().(*Line)
		ln.log, ln.msg = l, msg
		return ln
	}
	return l.begin(time.Now(), msg)
}

// begin starts a line of New's Log at time t.
func (l *Log) begin(t time.Time, msg string) *Line {
	ln := linePool.Get().(*Line)
	ln.log = l
	b := ln.buf[:0]
	// slog writes no time for the zero time.
	switch {
	case l.json && t.IsZero():
		b = append(b, `{"level":"INFO","msg":`...)
	case l.json:
		b = append(b, `{"time":`...)
		b = appendJSONTime(b, t)
		b = append(b, `,"level":"INFO","msg":`...)
	case t.IsZero():
		b = append(b, "level=INFO msg="...)
	default:
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t)
		b = append(b, " level=INFO msg="...)
	}
	ln.buf = ln.appendString(b, msg)
	return ln
}

// appendKey appends the separator before an attribute and its key.
func (ln *Line) appendKey(key string) {
	if ln.log.json {
		ln.buf = append(ln.buf, ',')
		ln.buf = ln.appendString(ln.buf, key)
		ln.buf = append(ln.buf, ':')
		return
	}
	ln.buf = append(ln.buf, ' ')
	ln.buf = ln.appendString(ln.buf, key)
	ln.buf = append(ln.buf, '=')
}

// appendString appends s as slog's handler of the line's format does.
func (ln *Line) appendString(b []byte, s string) []byte {
	if ln.log.json {
		b = append(b, '"')
		b = appendEscapedJSONString(b, s)
		return append(b, '"')
	}
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// String adds the attribute key with the string value v.
func (ln *Line) String(key, v string) {
	if ln.log.slog != nil {
		ln.attrs = append(ln.attrs, slog.String(key, v))
		return
	}
	ln.appendKey(key)
	ln.buf = ln.appendString(ln.buf, v)
}

// Int adds the attribute key with the integer value v.
func (ln *Line) Int(key string, v int64) {
	if ln.log.slog != nil {
		ln.attrs = append(ln.attrs, slog.Int64(key, v))
		return
	}
	ln.appendKey(key)
	ln.buf = strconv.AppendInt(ln.buf, v, 10)
}

// Bool adds the attribute key with the boolean value v.
func (ln *Line) Bool(key string, v bool) {
	if ln.log.slog != nil {
		ln.attrs = append(ln.attrs, slog.Bool(key, v))
		return
	}
	ln.appendKey(key)
	ln.buf = strconv.AppendBool(ln.buf, v)
}

// Duration adds the attribute key with the duration d: as d.String() in
// text, as integer nanoseconds in JSON (as slog writes them).
func (ln *Line) Duration(key string, d time.Duration) {
	if ln.log.slog != nil {
		ln.attrs = append(ln.attrs, slog.Duration(key, d))
		return
	}
	ln.appendKey(key)
	if ln.log.json {
		ln.buf = strconv.AppendInt(ln.buf, int64(d), 10)
		return
	}
	ln.buf = append(ln.buf, d.String()...)
}

// End writes the line with one Write and puts ln back in the pool. The
// write's error is dropped, as slog.Logger drops its handler's.
func (ln *Line) End() {
	l := ln.log
	if l.slog != nil {
		l.slog.LogAttrs(context.Background(), slog.LevelInfo, ln.msg, ln.attrs...)
		clear(ln.attrs) // drop the values' references before pooling
		ln.attrs = ln.attrs[:0]
	} else {
		ln.end()
		l.mu.Lock()
		l.w.Write(ln.buf)
		l.mu.Unlock()
	}
	ln.release()
}

// end closes the line in the buffer.
func (ln *Line) end() {
	if ln.log.json {
		ln.buf = append(ln.buf, '}')
	}
	ln.buf = append(ln.buf, '\n')
}

func (ln *Line) release() {
	ln.log, ln.msg = nil, ""
	if cap(ln.buf) > maxPooledLine {
		ln.buf = make([]byte, 0, 1024)
	}
	ln.buf = ln.buf[:0]
	linePool.Put(ln)
}
