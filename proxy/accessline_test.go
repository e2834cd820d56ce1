package proxy

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/accesslog"
)

// A call's access line from accesslog is, its time apart, the line slog's
// handler writes for the attributes the gateway gave slog before accesslog:
// the same attributes, order and values, a client's hostile model name and
// an error with a newline included.
func TestAccessLineSameAsSlog(t *testing.T) {
	f := func(name string, edit func(c *call)) {
		t.Helper()
		g, cc := finishFixture(t, Options{})
		edit(cc)
		now := cc.start.Add(1234567 * time.Nanosecond)
		for _, format := range []accesslog.Format{accesslog.Text, accesslog.JSON} {
			var ours, theirs bytes.Buffer
			g.obs.access = accesslog.New(&ours, format)
			g.obs.logAccess(cc, 502, now, 120, 7)
			g.obs.access = accesslog.FromSlog(slog.New(noTimeHandler(&theirs, format)))
			g.obs.logAccess(cc, 502, now, 120, 7)
			got := withoutTime(t, ours.String())
			if got != theirs.String() || strings.Count(got, "\n") != 1 {
				t.Errorf("%s, format %d:\n got %q\nwant %q", name, format, got, theirs.String())
			}
		}
	}
	f("resolved", func(*call) {})
	f("hostile model", func(c *call) {
		c.model = nil
		c.fields.Model = []byte("m\" level=ERROR\nmsg=forged \\ \x00\xff é " + strings.Repeat("=", 300))
	})
	f("failed", func(c *call) {
		c.dep, c.attempts, c.up.StaleRetries = nil, 3, 1
		c.reason, c.cause = "upstream_error", errors.New("dial: refused\r\n\"quoted\"\t\u2028")
		c.hasSession, c.firstByte = false, time.Time{}
	})
}

// noTimeHandler is slog's handler of format without the time attribute.
func noTimeHandler(w io.Writer, format accesslog.Format) slog.Handler {
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	if format == accesslog.JSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// withoutTime is line without its leading time attribute.
func withoutTime(t *testing.T, line string) string {
	t.Helper()
	if rest, ok := strings.CutPrefix(line, `{"time":"`); ok {
		_, rest, ok = strings.Cut(rest, `",`)
		if ok {
			return "{" + rest
		}
	} else if rest, ok := strings.CutPrefix(line, "time="); ok {
		_, rest, ok = strings.Cut(rest, " ")
		if ok {
			return rest
		}
	}
	t.Fatalf("no time in %q", line)
	return ""
}
