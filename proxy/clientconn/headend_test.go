package clientconn

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// headVerdict is what a head scan concluded: the head's empty line is still
// to come, or the head ended well, or without CRLF CRLF.
type headVerdict int

const (
	verdictOpen headVerdict = iota
	verdictOK
	verdictBad
)

func (v headVerdict) String() string { return [...]string{"open", "ok", "bad"}[v] }

func verdictOf(s *headScan) headVerdict {
	switch {
	case s.open():
		return verdictOpen
	case s.bad():
		return verdictBad
	}
	return verdictOK
}

// referenceHeadVerdict is headScan's rule written plainly: lines split at LF,
// empty lines ("" or "\r") before the request line skipped, and the head's
// empty line is bad unless it is CRLF after a request line alone or after a
// field line that ends in CRLF.
func referenceHeadVerdict(b []byte) headVerdict {
	lines := strings.SplitAfter(string(b), "\n")
	requestLine, fields, lastCRLF := false, false, false
	for _, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			return verdictOpen // the unfinished last line
		}
		body := strings.TrimSuffix(l, "\n")
		empty := body == "" || body == "\r"
		switch {
		case !requestLine:
			requestLine = !empty
		case empty:
			if body != "\r" || fields && !lastCRLF {
				return verdictBad
			}
			return verdictOK
		default:
			fields, lastCRLF = true, strings.HasSuffix(body, "\r")
		}
	}
	return verdictOpen
}

// scanSplit feeds b to a new scan in the pieces that cuts make, as reads
// would bring it, and returns its verdict.
func scanSplit(b []byte, cuts ...int) headVerdict {
	var s headScan
	s.start()
	prev := 0
	for _, c := range append(cuts, len(b)) {
		if s.open() && c > prev {
			s.feed(b[prev:c])
		}
		prev = c
	}
	return verdictOf(&s)
}

var headCases = []struct {
	name string
	head string
	want headVerdict
}{
	{"crlf", "GET / HTTP/1.1\r\nHost: gw\r\n\r\n", verdictOK},
	{"crlf, no fields", "GET / HTTP/1.0\r\n\r\n", verdictOK},
	{"crlf with a body after", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\n{\n\n}", verdictOK},
	{"bare lf everywhere", "GET / HTTP/1.1\nHost: gw\n\n", verdictBad},
	{"bare lf, no fields", "GET / HTTP/1.1\n\n", verdictBad},
	{"bare empty line after crlf", "GET / HTTP/1.1\r\nHost: gw\r\n\n", verdictBad},
	{"crlf empty line after a bare lf", "GET / HTTP/1.1\r\nHost: gw\n\r\n", verdictBad},
	{"bare lf end, crlf crlf further on", "GET / HTTP/1.1\r\nHost: gw\n\nX-Smuggled: 1\r\n\r\n", verdictBad},
	{"bare lf inside, crlf end", "GET / HTTP/1.1\nHost: gw\nAccept: */*\r\n\r\n", verdictOK},
	{"bare lf request line, crlf empty line", "GET / HTTP/1.0\n\r\n", verdictOK},
	{"leading empty lines", "\r\n\nGET / HTTP/1.1\r\nHost: gw\r\n\r\n", verdictOK},
	{"leading empty lines, bare end", "\r\n\r\nGET / HTTP/1.1\r\nHost: gw\n\n", verdictBad},
	{"unfinished", "GET / HTTP/1.1\r\nHost: gw\r\n", verdictOpen},
	{"unfinished request line", "GET / HTT", verdictOpen},
	{"cr alone in a field", "GET / HTTP/1.1\r\nHost: gw\r\nX-A: a\rb\r\n\r\n", verdictOK},
	{"empty line of cr cr lf", "GET / HTTP/1.1\r\nHost: gw\r\n\r\r\n", verdictOpen},
}

// The scan agrees with the plain rule on each case, however reads split the
// head: whole, in two pieces at every place, and a byte at a time.
func TestHeadScan(t *testing.T) {
	for _, c := range headCases {
		b := []byte(c.head)
		if got := referenceHeadVerdict(b); got != c.want {
			t.Fatalf("%s: the reference says %v, want %v", c.name, got, c.want)
		}
		if got := scanSplit(b); got != c.want {
			t.Errorf("%s, whole: %v, want %v", c.name, got, c.want)
		}
		for i := 1; i < len(b); i++ {
			if got := scanSplit(b, i); got != c.want {
				t.Errorf("%s, cut at %d: %v, want %v", c.name, i, got, c.want)
			}
		}
		bytewise := make([]int, len(b))
		for i := range bytewise {
			bytewise[i] = i
		}
		if got := scanSplit(b, bytewise...); got != c.want {
			t.Errorf("%s, a byte at a time: %v, want %v", c.name, got, c.want)
		}
	}
}

// errWait is what waitReader returns once its bytes are read: a client that
// sent them and waits.
var errWait = errors.New("the client waits")

type waitReader struct{ r *strings.Reader }

func (w waitReader) Read(p []byte) (int, error) {
	if w.r.Len() == 0 {
		return 0, errWait
	}
	return w.r.Read(p)
}

// The rule is fasthttp's own: given a head that the scan calls good, and
// nothing after it, fasthttp reads it to exactly its empty line; given one
// the scan calls bad, it waits for more. With a request after the bad one,
// fasthttp reads the bad head, and HeadEndsBadly tells it from its raw
// header block. This ties the rule to the fasthttp the gateway is built with.
func TestHeadScanMatchesFasthttp(t *testing.T) {
	for _, c := range headCases {
		if c.want == verdictOpen || strings.HasPrefix(c.head, "\r") || strings.HasPrefix(c.head, "\n") {
			continue
		}
		head := c.head[:headLength(c.head)]
		br := bufio.NewReader(waitReader{strings.NewReader(head)})
		var h fasthttp.RequestHeader
		err := h.Read(br)
		switch {
		case c.want == verdictOK && errors.Is(err, errWait):
			t.Errorf("%s: fasthttp waits for more: %v", c.name, err)
		case c.want == verdictOK && err == nil && br.Buffered() != 0:
			t.Errorf("%s: fasthttp left %d bytes of the head", c.name, br.Buffered())
		case c.want == verdictBad && !errors.Is(err, errWait):
			t.Errorf("%s: fasthttp did not wait for more: %v", c.name, err)
		}

		next := "GET /next HTTP/1.1\r\nHost: gw\r\n\r\n"
		br = bufio.NewReader(strings.NewReader(head + next))
		h.Reset()
		// (A head without fields fails on its missing Host.)
		if err := h.Read(br); err == nil {
			if got := HeadEndsBadly(h.RawHeaders()); got != (c.want == verdictBad) {
				t.Errorf("%s, with a request after it: HeadEndsBadly %v", c.name, got)
			}
		}
	}
}

// headLength is the length of head up to and with its empty line.
func headLength(head string) int {
	lines := strings.SplitAfter(head, "\n")
	n, requestLine := 0, false
	for _, l := range lines {
		n += len(l)
		body := strings.TrimSuffix(l, "\n")
		empty := body == "" || body == "\r"
		if requestLine && empty {
			return n
		}
		requestLine = requestLine || !empty
	}
	return len(head)
}

// The scan and the plain rule agree on any bytes, split anywhere.
func FuzzHeadScan(f *testing.F) {
	for _, c := range headCases {
		f.Add([]byte(c.head), uint16(3), uint16(17))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut1, cut2 uint16) {
		c1, c2 := int(cut1)%(len(b)+1), int(cut2)%(len(b)+1)
		if c1 > c2 {
			c1, c2 = c2, c1
		}
		want := referenceHeadVerdict(b)
		if got := scanSplit(b, c1, c2); got != want {
			t.Fatalf("%q cut at %d and %d: %v, want %v", b, c1, c2, got, want)
		}
	})
}

// What the scan costs a head that takes more than one read, per head.
func BenchmarkHeadScan(b *testing.B) {
	head := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" +
		"User-Agent: OpenAI/Go 3.8.1\r\nContent-Length: 112\r\nAccept: application/json\r\n" +
		"Authorization: Bearer sk-0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\n" +
		"X-Stainless-Arch: x64\r\nX-Stainless-Lang: go\r\nX-Stainless-Os: Linux\r\n" +
		"X-Stainless-Package-Version: 3.8.1\r\nX-Stainless-Retry-Count: 0\r\n" +
		"X-Stainless-Runtime: go\r\nX-Stainless-Runtime-Version: go1.26\r\n" +
		"Accept-Encoding: gzip\r\n\r\n" +
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(bytes.Index(head, []byte("\r\n\r\n")) + 4))
	var s headScan
	for b.Loop() {
		s.start()
		s.feed(head)
	}
	if verdictOf(&s) != verdictOK {
		b.Fatal(verdictOf(&s))
	}
}
