package upstream

import (
	"bytes"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
)

// eventHeads follows an SSE stream as it is relayed and keeps the first bytes
// of the last complete event, so that the end of the stream can be judged: a
// stream whose last event is not its family's final one was cut short, even
// when the upstream ended it cleanly (fasthttp cannot tell a connection cut at
// a chunk boundary from a terminated chunked body). Its lines are parse's
// Splitter's; the zero value is ready.
type eventHeads struct {
	lines       parse.Splitter
	cur, last   [40]byte
	curN, lastN int
	cr          bool  // the stream has had a '\r': all its bytes go through lines
	events      int64 // events ended so far
}

// feed follows the next chunk of the stream. Whole lines that end in '\n'
// alone, as most streams' are, are taken an event at a time (feedLines); the
// rest, and every line of a stream that has used '\r', go through the line
// splitter, whose state between chunks is only whether a line is open.
func (h *eventHeads) feed(p []byte) {
	h.cr = h.cr || bytes.IndexByte(p, '\r') >= 0
	if !h.cr && !h.lines.InLine() {
		if end := bytes.LastIndexByte(p, '\n') + 1; end > 0 {
			h.feedLines(p[:end])
			p = p[end:]
		}
	}
	h.splitFeed(p)
}

// feedLines takes p, whole lines that end in '\n' alone, from the start of a
// line: as the splitter would, but once an event's head is full it skips to
// the event's end in one search instead of line by line.
func (h *eventHeads) feedLines(p []byte) {
	for len(p) > 0 {
		switch {
		case p[0] == '\n': // a blank line ends the event
			h.endEvent()
			p = p[1:]
		case h.curN < len(h.cur): // a line of the event's head, with its line end
			line := bytes.IndexByte(p, '\n') + 1
			h.curN += copy(h.cur[h.curN:], p[:line])
			p = p[line:]
		default: // the rest of the event: up to the blank line that ends it
			end := bytes.Index(p, []byte("\n\n"))
			if end < 0 {
				return
			}
			p = p[end+1:]
		}
	}
}

// splitFeed follows p through the line splitter.
func (h *eventHeads) splitFeed(p []byte) {
	h.lines.Feed(p)
	for {
		piece, end, ok := h.lines.Next()
		if !ok {
			return
		}
		switch end {
		case parse.BlankLine:
			h.endEvent()
		case parse.LineEnd:
			h.addLine(piece)
			h.addLine(newline)
		default:
			h.addLine(piece)
		}
	}
}

// endEvent is a blank line: it ends the event, if one began.
func (h *eventHeads) endEvent() {
	if h.curN > 0 {
		h.last, h.lastN, h.curN = h.cur, h.curN, 0
		h.events++
	}
}

func (h *eventHeads) addLine(b []byte) {
	if h.curN < len(h.cur) {
		h.curN += copy(h.cur[h.curN:], b)
	}
}

// midEvent reports whether the stream stopped inside an event.
func (h *eventHeads) midEvent() bool { return h.curN > 0 || h.lines.InLine() }

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
