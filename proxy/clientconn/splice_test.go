package clientconn

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// recordConn is a connection that keeps what is written to it.
type recordConn struct {
	net.Conn
	out    bytes.Buffer
	writes int
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.writes++
	return r.out.Write(p)
}
func (r *recordConn) SetWriteDeadline(time.Time) error { return nil }
func (r *recordConn) SetReadDeadline(time.Time) error  { return nil }
func (r *recordConn) SetDeadline(time.Time) error      { return nil }
func (r *recordConn) Close() error                     { return nil }

const spliceTestLines = "openai-processing-ms: 12\r\nx-ratelimit-limit-requests: 10000\r\ncf-ray: 8f1\r\n"

// takenSplice is a connection whose answer began with the mark: its lines
// are spliceTestLines, and resp carries the mark.
func takenSplice(t *testing.T) (*Conn, *recordConn, *fasthttp.Response) {
	t.Helper()
	rc := &recordConn{}
	c := newConn(rc, time.Minute)
	lines := c.TakeSplice()
	if lines == nil {
		t.Fatal("a new connection cannot take a splice")
	}
	c.TookSplice(append(lines, spliceTestLines...), true)
	if c.TakeSplice() != nil {
		t.Fatal("a second splice was taken while the first waits")
	}
	resp := new(fasthttp.Response)
	resp.Header.DisableNormalizing()
	resp.Header.AddBytesKV(spliceName, spliceValue)
	resp.Header.Set("X-Request-Id", "req-1")
	resp.SetBodyString(`{"id":"x"}`)
	return c, rc, resp
}

// answerBytes is resp as fasthttp writes it, and as the client must get it,
// the mark's line replaced by the lines.
func answerBytes(t *testing.T, resp *fasthttp.Response) (written, want []byte) {
	t.Helper()
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	if err := resp.Write(bw); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	written = b.Bytes()
	if bytes.Count(written, spliceLine) != 1 {
		t.Fatalf("the answer does not carry the mark once: %q", written)
	}
	return written, bytes.Replace(written, spliceLine, []byte(spliceTestLines), 1)
}

// The held answer's bytes, in writes cut anywhere, the mark's line among
// them, after earlier bytes of any length (past heldCap too), reach the
// client with the lines in the mark's place; no byte of the mark is sent.
func TestSpliceAcrossWrites(t *testing.T) {
	for _, earlier := range []int{0, 100, heldCap - 50, heldCap + 3000} {
		for cut := 0; cut <= 400; cut += 7 {
			c, rc, resp := takenSplice(t)
			written, want := answerBytes(t, resp)
			before := bytes.Repeat([]byte("e"), earlier)
			c.HoldTail()
			if earlier > 0 { // an earlier answer's bytes, held before this one's handler ended
				c.Write(before[:earlier/2])
			}
			c.ArmSplice(resp, HeldWhole)
			all := append(append([]byte{}, before[earlier/2:]...), written...)
			cut := min(cut, len(all))
			for _, p := range [][]byte{all[:cut], all[cut:]} {
				if _, err := c.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			if c.splice.state != spliceNone {
				t.Fatalf("earlier %d, cut %d: the mark was not found", earlier, cut)
			}
			if err := c.sendHeld(); err != nil {
				t.Fatal(err)
			}
			got := rc.out.Bytes()
			if !bytes.Equal(got, append(before, want...)) {
				t.Fatalf("earlier %d, cut %d: the client got\n%q\nwant\n%q", earlier, cut, got[earlier:], want)
			}
		}
	}
}

// An answer replaced after it began (an error written instead) does not
// carry the mark: its bytes go as they are, and the next answer can splice.
func TestSpliceAnswerReplaced(t *testing.T) {
	c, rc, resp := takenSplice(t)
	resp.Header.Reset()
	resp.SetStatusCode(500)
	resp.SetBodyString("store down")
	c.HoldTail()
	c.ArmSplice(resp, HeldWhole)
	if c.splice.state != spliceNone {
		t.Fatal("a splice was armed for an answer without the mark")
	}
	written, _ := answerBytesPlain(t, resp)
	c.Write(written)
	c.sendHeld()
	if !bytes.Equal(rc.out.Bytes(), written) {
		t.Fatalf("client got %q, want %q", rc.out.Bytes(), written)
	}
	if c.TakeSplice() == nil {
		t.Fatal("the next answer cannot splice")
	}
}

func answerBytesPlain(t *testing.T, resp *fasthttp.Response) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	err := resp.Write(bw)
	bw.Flush()
	return b.Bytes(), err
}

// An answer that is not held gets its lines back as headers, after the
// ones fasthttp had: the mark is gone from it.
func TestSpliceNotHeld(t *testing.T) {
	c, _, resp := takenSplice(t)
	c.ArmSplice(resp, HeldNot)
	if c.splice.state != spliceNone {
		t.Fatal("a splice stays for an answer that is not held")
	}
	head := string(resp.Header.Header())
	if strings.Contains(head, string(spliceName)) {
		t.Fatalf("the mark is still in %q", head)
	}
	want := "X-Request-Id: req-1\r\n" + spliceTestLines
	if !strings.Contains(head, want) {
		t.Fatalf("head %q lacks %q", head, want)
	}
}

// While the mark is looked for, a read (the server reading a request the
// client pipelined, with this answer still in its buffer) sends only the
// bytes searched, and the holding goes on; so does a deadline's change.
// Closing gives the search up and sends what is held as it is.
func TestSpliceWhileReading(t *testing.T) {
	c, rc, resp := takenSplice(t)
	written, want := answerBytes(t, resp)
	c.HoldTail()
	c.ArmSplice(resp, HeldWhole)
	at := bytes.Index(written, spliceLine) + 5 // inside the mark's line
	c.Write(written[:at])
	c.sendHeld() // as Read and SetWriteDeadline do
	if got := rc.out.Len(); got > at-5 || got < at-len(spliceLine) {
		t.Fatalf("sent %d bytes of %d held, the mark's line starting at %d", got, at, at-5)
	}
	if !c.holding.Load() || c.splice.state != spliceArmed {
		t.Fatal("the holding or the search ended while the answer is written")
	}
	c.Write(written[at:])
	c.sendHeld()
	if !bytes.Equal(rc.out.Bytes(), want) {
		t.Fatalf("client got %q, want %q", rc.out.Bytes(), want)
	}

	c, rc, resp = takenSplice(t)
	written, _ = answerBytes(t, resp)
	c.HoldTail()
	c.ArmSplice(resp, HeldWhole)
	c.Write(written[:at])
	c.Close()
	got := rc.out.Bytes()
	if !bytes.HasPrefix(written, got) || bytes.Contains(got, spliceName[:len("x-modelgate-")+4]) || c.splice.state != spliceNone {
		t.Fatalf("closed: client got %q, splice %v; want the bytes before the mark", got, c.splice.state)
	}
}

// An answer replaced by a large one after it began is not held for the
// mark: its lines go back into it as headers.
func TestSpliceAnswerGrew(t *testing.T) {
	c, _, resp := takenSplice(t)
	resp.SetBody(bytes.Repeat([]byte("a"), SpliceMaxBody+1))
	c.HoldTail()
	c.ArmSplice(resp, HeldWhole)
	if c.splice.state != spliceNone {
		t.Fatal("a splice was armed for a large answer")
	}
	if head := string(resp.Header.Header()); strings.Contains(head, string(spliceName)) || !strings.Contains(head, spliceTestLines) {
		t.Fatalf("head %q", head)
	}
}

// A stream's head is held only until the mark is replaced, then sent at once,
// whether it is written alone or with the stream's first bytes; what follows
// is not held.
func TestSpliceStreamHead(t *testing.T) {
	for _, withFirst := range []bool{false, true} {
		c, rc, resp := takenSplice(t)
		written, want := answerBytes(t, resp)
		head := written[:bytes.Index(written, []byte("\r\n\r\n"))+4]
		wantHead := want[:bytes.Index(want, []byte("\r\n\r\n"))+4]
		c.ArmSplice(resp, HeldHead)
		first := append([]byte{}, head...)
		if withFirst {
			first = append(first, "data: 1\n\n"...)
		}
		cut := len(head) / 2
		c.Write(first[:cut])
		if rc.out.Len() != 0 && rc.out.Len() > cut-len(spliceLine) {
			t.Fatalf("sent %d bytes of the head before its mark was found", rc.out.Len())
		}
		c.Write(first[cut:])
		wantFirst := append(append([]byte{}, wantHead...), first[len(head):]...)
		if !bytes.Equal(rc.out.Bytes(), wantFirst) || c.holding.Load() {
			t.Fatalf("with the first event %v: client got %q, holding %v; want %q at once",
				withFirst, rc.out.Bytes(), c.holding.Load(), wantFirst)
		}
		c.Write([]byte("data: 2\n\n"))
		if !bytes.HasSuffix(rc.out.Bytes(), []byte("data: 2\n\n")) {
			t.Fatal("a stream's event after its head was held")
		}
	}
}
