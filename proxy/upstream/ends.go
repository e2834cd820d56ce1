package upstream

import (
	"bytes"

	"github.com/modelgate/gateway/proxy/family"
)

// eventHeads follows an SSE stream as it is relayed and keeps the first bytes
// of the last complete event, so that the end of the stream can be judged: a
// stream whose last event is not its family's final one was cut short, even
// when the upstream ended it cleanly (fasthttp cannot tell a connection cut at
// a chunk boundary from a terminated chunked body). It jumps from newline to
// newline; the zero value is ready.
type eventHeads struct {
	cur, last   [40]byte
	curN, lastN int
	lineLen     int  // bytes of the current line so far
	lastCR      bool // the current line so far ends in '\r'
}

func (h *eventHeads) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			h.addLine(p)
			h.lineLen += len(p)
			h.lastCR = p[len(p)-1] == '\r'
			return
		}
		seg := p[:i]
		n := h.lineLen + len(seg)
		cr := len(seg) > 0 && seg[len(seg)-1] == '\r' || len(seg) == 0 && h.lastCR
		if n == 0 || n == 1 && cr {
			if h.curN > 0 { // a blank line ends the event
				h.last, h.lastN, h.curN = h.cur, h.curN, 0
			}
		} else {
			h.addLine(seg)
			h.addLine(newline)
		}
		h.lineLen, h.lastCR = 0, false
		p = p[i+1:]
	}
}

func (h *eventHeads) addLine(b []byte) {
	if h.curN < len(h.cur) {
		h.curN += copy(h.cur[h.curN:], b)
	}
}

// midEvent reports whether the stream stopped inside an event.
func (h *eventHeads) midEvent() bool { return h.curN > 0 || h.lineLen > 0 }

var (
	newline         = []byte{'\n'}
	finalDone       = []byte("[DONE]")
	finalEventError = []byte("event: error")
	finalMarkers    = [family.Count][][]byte{
		family.Alpha: {[]byte("message_stop"), finalEventError},
		family.Beta:  {finalDone},
	}
	finalResponses = [][]byte{
		[]byte("response.completed"), []byte("response.failed"), []byte("response.incomplete"), finalEventError,
	}
)

// ended reports whether the last complete event is a final one for the
// family (a Responses stream when responses is set). Families without a final
// event always count as ended.
func (h *eventHeads) ended(fam family.Family, responses bool) bool {
	markers := finalMarkers[fam]
	if responses {
		markers = finalResponses
	}
	if markers == nil {
		return true
	}
	head := h.last[:h.lastN]
	for _, m := range markers {
		if bytes.Contains(head, m) {
			return true
		}
	}
	// a data frame with a top-level error also ends a beta stream
	return fam == family.Beta && bytes.HasPrefix(head, []byte("data: {\"error\""))
}
