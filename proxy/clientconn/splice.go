package clientconn

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"

	"github.com/valyala/fasthttp"
)

// The answer head's lines are put into the bytes fasthttp writes, not given to
// fasthttp one by one.
//
// fasthttp takes a response header only through calls that copy its name and
// value, search both for CR and LF, and match the name against the headers it
// keeps apart; it then copies each again as it writes the head. For a
// provider's twenty headers that was 3 µs of a chat call under load. An
// answer's headers are instead appended, as fasthttp would write them, to the
// lines of the connection's headSplice (upstream.Relay.BeginLines), and the
// response gets one header in their place: the mark, whose name is made of
// random bytes when the process starts. The connection holds a whole answer
// back until the next read (proxy's holdAnswer), and a stream's first bytes until its
// head is complete; as fasthttp writes them, the held bytes are searched for
// the mark's line, which is replaced by the lines. The client gets the head
// Begin would have made, byte for byte.
//
// A mark that cannot be found is never sent in part: while one is looked for,
// the last bytes held that may begin it stay held. No client or upstream can
// write the mark: the name is never sent, and a response's header lines are
// fasthttp's, checked for CR and LF. A whole answer of a large body, a second
// answer on a connection whose first is still being written (pipelining), a
// response changed after the answer began (an error written instead) and one
// on a hijacked connection take fasthttp's calls as before.

// SpliceMaxBody bounds the body of a whole answer whose head is spliced: the
// bytes held while the mark is looked for are its and at most fasthttp's
// write buffer of the answers before it. A larger body makes the head's cost
// small. A stream's head is held alone: it is sent once the mark is replaced.
const SpliceMaxBody = 16 << 10

var (
	spliceName  = newSpliceName()
	spliceValue = []byte("1")
	// spliceLine is the mark's line as fasthttp writes it.
	spliceLine = slices.Concat(spliceName, []byte(": "), spliceValue, []byte("\r\n"))
)

func newSpliceName() []byte {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (crypto/rand)
	return append([]byte("x-modelgate-"), hex.EncodeToString(b[:])...)
}

// headSplice is a connection's answer head in waiting: lines to put in the
// place of the mark, while the state says.
type headSplice struct {
	lines *[]byte // from splicePool while taken or armed
	state spliceState
	from  int  // where in the held bytes the search for the mark goes on
	flush bool // a stream's head: sent as soon as the mark is replaced
}

// SpliceHold says how the connection holds the answer whose handler
// returned (see ArmSplice).
type SpliceHold uint8

const (
	HeldWhole SpliceHold = iota // a whole answer, held until the next read
	HeldHead                    // a stream: its head, held until the mark is replaced
	HeldNot                     // not held (a hijacked connection)
)

type spliceState uint8

const (
	spliceNone  spliceState = iota
	spliceTaken             // the answer began with the mark; its handler runs
	spliceArmed             // the answer is held: the mark is looked for in what is written
)

var splicePool = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

// SpliceMark returns the name and the value of the header that stands for
// an answer's lines in the response (see TakeSplice): valid for the
// process's life, never to be changed.
func SpliceMark() (name, value []byte) { return spliceName, spliceValue }

// AcquireHeadBuffer returns an empty buffer for an answer's head, from the
// pool of the answers' lines; ReleaseHeadBuffer gives it back.
func AcquireHeadBuffer() *[]byte { return splicePool.Get().(*[]byte) }

// ReleaseHeadBuffer gives back a buffer of AcquireHeadBuffer; b is not used
// after.
func ReleaseHeadBuffer(b *[]byte) {
	*b = (*b)[:0]
	splicePool.Put(b)
}

// TakeSplice returns the buffer for an answer's lines when the connection can
// splice one now: not while an answer before it is still looked for.
func (c *Conn) TakeSplice() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.splice.state != spliceNone || c.splice.lines != nil {
		return nil
	}
	c.splice.lines = splicePool.Get().(*[]byte)
	return (*c.splice.lines)[:0]
}

// TookSplice keeps the lines an answer's head put in the buffer TakeSplice
// gave, when ok, and gives the buffer back otherwise.
func (c *Conn) TookSplice(lines []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		c.dropSplice()
		return
	}
	*c.splice.lines = lines
	c.splice.state = spliceTaken
}

// dropSplice forgets the lines in waiting (under mu).
func (c *Conn) dropSplice() {
	if c.splice.lines != nil {
		*c.splice.lines = (*c.splice.lines)[:0]
		splicePool.Put(c.splice.lines)
	}
	c.splice = headSplice{}
}

// ArmSplice is called once the handler of an answer that took the splice
// returned: if resp still carries the mark and the connection holds the
// answer (how), its bytes are searched for the mark as they come; a stream's
// are held for that alone, and sent once it is replaced. If resp carries the
// mark and is not held, the lines go back into it as headers.
func (c *Conn) ArmSplice(resp *fasthttp.Response, how SpliceHold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.splice.state != spliceTaken {
		return
	}
	if resp.Header.PeekBytes(spliceName) == nil { // the answer was replaced
		c.dropSplice()
		return
	}
	// A whole answer replaced by a large one is not held for the search.
	// (Body is not asked of a stream: it would read the stream.)
	if how == HeldNot || how == HeldWhole && len(resp.Body()) > SpliceMaxBody {
		resp.Header.DelBytes(spliceName)
		for lines := *c.splice.lines; len(lines) > 0; {
			line, rest, _ := bytes.Cut(lines, []byte("\r\n"))
			name, value, _ := bytes.Cut(line, []byte(": "))
			resp.Header.AddBytesKV(name, value)
			lines = rest
		}
		c.dropSplice()
		return
	}
	if how == HeldHead {
		c.holding.Store(true)
		c.splice.flush = true
	}
	c.splice.state, c.splice.from = spliceArmed, 0
	if c.held != nil {
		c.splice.from = len(*c.held)
	}
}

// holdSpliced holds p while the mark is looked for (under mu): the held
// bytes are searched for its line, which is replaced by the lines once
// found. Past heldCap, what is held is sent but for the bytes that may begin
// the mark's line; once the mark is found, what is held goes as hold sends it.
func (c *Conn) holdSpliced(p []byte) error {
	if c.held == nil {
		c.held = heldPool.Get().(*[]byte)
	}
	*c.held = append(*c.held, p...)
	h := *c.held
	if i := bytes.Index(h[c.splice.from:], spliceLine); i >= 0 {
		*c.held = c.putLines(h, c.splice.from+i)
		flush := c.splice.flush
		c.dropSplice()
		if flush || len(*c.held) > heldCap {
			return c.sendHeldLocked()
		}
		return nil
	}
	c.splice.from = len(h) - min(len(h), len(spliceLine)-1)
	if len(h) <= heldCap {
		return nil
	}
	return c.sendSearched()
}

// putLines replaces the mark's line at h[at:] by the lines, and returns h.
func (c *Conn) putLines(h []byte, at int) []byte {
	lines := *c.splice.lines
	end, n := at+len(spliceLine), len(h)
	grow := len(lines) - len(spliceLine)
	if grow > 0 {
		h = slices.Grow(h, grow)[:n+grow]
	}
	copy(h[end+grow:], h[end:n])
	copy(h[at:], lines)
	return h[:n+grow]
}

// sendSearched sends the held bytes that the search for the mark has passed
// (under mu); holding goes on.
func (c *Conn) sendSearched() error {
	if c.held == nil || c.splice.from == 0 {
		return nil
	}
	h := *c.held
	if _, err := c.write(h[:c.splice.from]); err != nil {
		return err
	}
	*c.held = h[:copy(h, h[c.splice.from:])]
	c.splice.from = 0
	return nil
}

// endSplice gives up the search for the mark, as the connection closes in
// the middle of the answer's head: the held bytes that may begin the mark are
// dropped, so that no part of its name leaves; the rest goes as it is.
func (c *Conn) endSplice() {
	c.mu.Lock()
	if c.splice.state == spliceArmed {
		if c.held != nil {
			*c.held = (*c.held)[:c.splice.from]
		}
		c.dropSplice()
	}
	c.mu.Unlock()
}
