package accesslog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// slogLine is the line slog's handler of format f writes for t, msg and attrs.
func slogLine(t testing.TB, f Format, at time.Time, msg string, attrs []slog.Attr) string {
	t.Helper()
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if f == JSON {
		h = slog.NewJSONHandler(&buf, nil)
	}
	r := slog.NewRecord(at, slog.LevelInfo, msg, 0)
	r.AddAttrs(attrs...)
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// ourLine is the line a Log of format f writes for the same.
func ourLine(f Format, at time.Time, msg string, attrs []slog.Attr) string {
	var buf bytes.Buffer
	ln := New(&buf, f).begin(at, msg)
	addAll(ln, attrs)
	ln.End()
	return buf.String()
}

func addAll(ln *Line, attrs []slog.Attr) {
	for _, a := range attrs {
		switch a.Value.Kind() {
		case slog.KindString:
			ln.String(a.Key, a.Value.String())
		case slog.KindInt64:
			ln.Int(a.Key, a.Value.Int64())
		case slog.KindBool:
			ln.Bool(a.Key, a.Value.Bool())
		case slog.KindDuration:
			ln.Duration(a.Key, a.Value.Duration())
		default:
			panic(fmt.Sprintf("BUG: kind %s", a.Value.Kind()))
		}
	}
}

// sameAsSlog checks the line of both formats against slog's.
func sameAsSlog(t testing.TB, at time.Time, msg string, attrs []slog.Attr) {
	t.Helper()
	for _, f := range []Format{Text, JSON} {
		want := slogLine(t, f, at, msg, attrs)
		if got := ourLine(f, at, msg, attrs); got != want {
			t.Fatalf("format %d:\n got %q\nwant %q", f, got, want)
		}
	}
}

// hostile are strings a client could send, and edge cases of the quoting.
var hostile = []string{
	"", "plain", "gpt-4o", "claude-3-5-sonnet@2024", "a b", "a=b", "=", " ", `"`, `a"b`, `\`, `a\b`,
	"\n", "line\nrequest_id=forged level=ERROR", "\r\n", "\t", "\x00", "\x01\x1f", "\x7f", "\x80",
	"\xff\xfe", "a\xc3", "\xc3\x28", "é", "日本語", "emoji 🙂", "\u2028", "\u2029", "\u00a0", "\u200b",
	"\ufeff", "\U0010ffff", "\ufffd", "{}", `{"a":1}`, "<script>&amp;", "key:value", "100%", "#", "'",
	strings.Repeat("x", 5000), strings.Repeat("\"\\\n", 2000), strings.Repeat("é", 1000) + "\x00",
}

var times = []time.Time{
	time.Date(2026, 11, 28, 9, 3, 4, 0, time.UTC),
	time.Date(2026, 11, 28, 9, 3, 4, 1, time.UTC),
	time.Date(2026, 11, 28, 9, 3, 4, 999_999_999, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 120_000_000, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 123_456_789, time.FixedZone("", 5*3600+30*60)),
	time.Date(1999, 12, 31, 23, 59, 59, 500_000, time.FixedZone("X", -8*3600)),
	time.Date(0, 1, 1, 0, 0, 0, 1_000_000, time.UTC),
	time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Now(),
	{},
}

// A call's line as the gateway writes it, with every value hostile in turn.
func TestLineSameAsSlog(t *testing.T) {
	for _, at := range times {
		sameAsSlog(t, at, "request", callAttrs("req_1", "team-a", "gpt-4o", "boom"))
	}
	for _, s := range hostile {
		sameAsSlog(t, times[4], "request", callAttrs(s, s, s, s))
		sameAsSlog(t, times[0], s, []slog.Attr{slog.String(s, s)})
	}
	sameAsSlog(t, times[0], "request", nil)
}

// Every value of the non-string kinds' edges.
func TestValuesSameAsSlog(t *testing.T) {
	var attrs []slog.Attr
	for _, n := range []int64{0, 1, -1, 200, 1 << 62, -1 << 63, 1<<63 - 1} {
		attrs = append(attrs, slog.Int64("n", n))
	}
	for _, d := range []time.Duration{0, 1, 999, time.Microsecond, 1500 * time.Nanosecond, time.Millisecond,
		2*time.Millisecond + 300*time.Microsecond, time.Second, 90 * time.Minute, -time.Millisecond,
		1<<63 - 1, -1 << 63} {
		attrs = append(attrs, slog.Duration("d", d))
	}
	attrs = append(attrs, slog.Bool("t", true), slog.Bool("f", false))
	sameAsSlog(t, times[0], "request", attrs)
}

// callAttrs is a whole access line's attributes, as proxy writes them.
func callAttrs(reqID, keyID, model, cause string) []slog.Attr {
	return []slog.Attr{
		slog.String("request_id", reqID), slog.String("key_id", keyID), slog.String("family", "beta"),
		slog.String("endpoint", "chat"), slog.String("model", model), slog.String("deployment", ""),
		slog.Int("status", 502), slog.Duration("latency", 1234567*time.Nanosecond),
		slog.Int64("bytes_in", 120), slog.Int64("bytes_out", 0), slog.Bool("stream", true),
		slog.Duration("ttfb", 456*time.Microsecond), slog.String("session", "0123456789abcdef"),
		slog.Int("attempts", 2), slog.Int("stale_retries", 1),
		slog.Int64("input_tokens", 10), slog.Int64("output_tokens", 20), slog.Int64("cached_tokens", 0),
		slog.Int64("reasoning_tokens", 0), slog.String("cost_usd", "0.000123"), slog.String("reserved_usd", "0.01"),
		slog.String("reason", "upstream_error"), slog.String("error", cause), slog.String("trace_id", "00f067aa0ba902b7"),
	}
}

// A newline in a value never starts a line of its own.
func TestValueCannotStartALine(t *testing.T) {
	for _, f := range []Format{Text, JSON} {
		got := ourLine(f, times[0], "request", callAttrs("x", "k", "m\nlevel=ERROR msg=forged", "e\r\n{}"))
		if strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
			t.Errorf("format %d: %q", f, got)
		}
	}
}

// A Log from a *slog.Logger hands it the same record.
func TestFromSlog(t *testing.T) {
	if FromSlog(nil) != nil || (*Log)(nil).Begin("request") != nil {
		t.Fatal("a nil logger is not off")
	}
	var buf bytes.Buffer
	l := FromSlog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	ln := l.Begin("request")
	addAll(ln, callAttrs("r", "k", "m", "e"))
	ln.End()
	want := slogLine(t, JSON, time.Time{}, "request", callAttrs("r", "k", "m", "e"))
	if buf.String() != want {
		t.Fatalf("got  %q\nwant %q", buf.String(), want)
	}
	if FromSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))).Begin("request") != nil {
		t.Fatal("a line begun below the logger's level")
	}
}

// FuzzAccessLine feeds arbitrary strings into a call line's string values
// and the message, and holds both formats to slog's bytes.
func FuzzAccessLine(f *testing.F) {
	for _, s := range hostile[:len(hostile)-3] {
		f.Add(s, s, s, int64(1))
	}
	f.Add("req", "team\x00", "m\xff", int64(-5))
	f.Fuzz(func(t *testing.T, reqID, model, cause string, n int64) {
		attrs := callAttrs(reqID, model, model, cause)
		attrs = append(attrs, slog.Int64("n", n), slog.Duration("d", time.Duration(n)), slog.String(cause, reqID))
		sameAsSlog(t, time.Unix(0, n).UTC(), reqID, attrs)
	})
}

// Lines written from many goroutines at once reach the writer whole, one
// Write each, though the writer itself is not safe for concurrent use.
func TestConcurrentLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, JSON)
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				ln := l.Begin("request")
				ln.Int("writer", int64(w))
				ln.String("value", strings.Repeat("v\n", i))
				ln.End()
			}
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, line := range got {
		var v struct{ Writer *int }
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Writer == nil {
			t.Fatalf("%v: %q", err, line)
		}
	}
}
