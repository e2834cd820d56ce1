package upstream

import (
	"bytes"

	"github.com/modelgate/gateway/parse"
)

// usageReader reads the token usage an answer reports as the relay passes
// it on, buffered or streamed: see parse.UsageScanner. It is off unless the
// caller asks (Relay.CountUsage). It also notes whether the answer was read
// to its end, so that usage it never reported is known to be missing, and
// takes out of a beta chat stream what the gateway's include_usage added
// (Relay.StripUsage). The zero value is ready (and off).
type usageReader struct {
	on    bool
	s     parse.UsageScanner
	strip usageStrip
	// ended: the answer was read to its end (a stream's with its final
	// event): what it reported is all it will.
	ended bool
	// text counts the generated text of an SSE stream, for the estimate of
	// its output when its usage does not come (Relay.TextBytes).
	text parse.TextCounter
}

func (u *usageReader) feed(p []byte) {
	if u.on {
		u.s.Feed(p)
	}
}

// feedText counts the text of the next chunk of an SSE stream.
func (u *usageReader) feedText(p []byte) {
	if u.on {
		u.text.Feed(p)
	}
}

func (u *usageReader) reset() {
	if u.on {
		u.s.Reset()
		u.text.Reset(false)
		u.on = false
	}
	u.strip, u.ended = usageStrip{}, false
}

// CountUsage makes r read the token usage of the answer of the next Send.
func (r *Relay) CountUsage() { r.usage.on = true }

// Usage returns the token usage read from the answer so far; Found is false
// when there was none or CountUsage was not called.
func (r *Relay) Usage() parse.Usage { return r.usage.s.Usage() }

// Ended reports whether the answer was read to its end: loaded whole, or a
// stream that reached its family's final event. A call that did not end
// (failed, cut, or whose client left) may not have its usage.
func (r *Relay) Ended() bool { return r.usage.ended }

// Events returns the SSE events relayed so far, whole.
func (r *Relay) Events() int64 { return r.heads.events }

// TextBytes returns the bytes of generated text relayed so far in an SSE
// stream whose usage is read (CountUsage): see parse.TextCounter.
func (r *Relay) TextBytes() int64 { return r.usage.text.Bytes() }

// StripUsage makes r take out of the next answer, a beta chat stream whose
// request the gateway made ask for its usage (parse.AppendAskingUsage), what
// that added: the usage event before data: [DONE] (read all the same, see
// CountUsage) and the "usage":null member of every other chunk. The client
// gets the stream it would have got without the edit.
func (r *Relay) StripUsage() { r.usage.strip.on = true }

// usageStrip filters the bytes an SSE relay writes, as StripUsage says. An
// event is judged whole: the relay writes whole events but for one larger
// than its buffer, whose parts are passed with their "usage":null members
// taken out where a part holds one whole (a usage event is never that large).
type usageStrip struct {
	on bool
	// inEvent: the last bytes filtered ended inside an event, which is passed.
	inEvent bool
}

// filter takes what StripUsage says out of p, events from the start of one
// (or the rest of the event filter last saw begin), and returns what is left,
// in p's array.
func (s *usageStrip) filter(p []byte) []byte {
	if !s.on {
		return p
	}
	out := p[:0]
	for len(p) > 0 {
		n, whole := eventLen(p)
		ev := p[:n]
		if !(whole && !s.inEvent && parse.IsAddedUsageEvent(ev)) {
			out = parse.AppendWithoutUsageNull(out, ev)
		}
		s.inEvent = !whole
		p = p[n:]
	}
	return out
}

// eventLen returns the length of the first event in p, up to and with the
// blank line that ends it, and whether it is whole; else all of p.
func eventLen(p []byte) (int, bool) {
	for i := 0; i < len(p); {
		j := bytes.IndexAny(p[i:], "\r\n")
		if j < 0 {
			break
		}
		end := i + j + 1
		if p[i+j] == '\r' && end < len(p) && p[end] == '\n' {
			end++
		}
		if j == 0 { // a blank line
			return end, true
		}
		i = end
	}
	return len(p), false
}
