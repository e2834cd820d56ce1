package parse

import "bytes"

// TextCounter counts the bytes of the text a model generates in an SSE stream, fed in chunks
// of any size, without decoding it: the string values of the members that carry a stream's
// deltas. Alpha's "text", "thinking" and "partial_json" (content_block_delta), beta chat's
// "content", "refusal" and "arguments", gamma's "text" (a candidate's parts); in a Responses
// stream only "delta" (its *.delta events), since its *.done events and the final response
// repeat the text whole. A value counts from its opening quote to its closing one, escapes as
// they are written (\n is 2 bytes, \u00e9 6), which errs on the side of more.
//
// A member is found by its `":"` (a key's closing quote, the colon, a string value's opening
// quote), which cannot occur unescaped inside a string, and its key before it in the same
// chunk: a key or a `":"` split between two chunks is missed, and its value not counted.
//
// The zero value counts a stream other than Responses; Reset makes it ready for another
// stream. Not safe for concurrent use.
type TextCounter struct {
	n         int64
	responses bool
	inText    bool // inside a counted value
	escaped   bool // the byte before the chunk is the backslash of an escape in a counted value
}

var (
	deltaTextKeys = [][]byte{[]byte(`"text"`), []byte(`"content"`), []byte(`"thinking"`),
		[]byte(`"partial_json"`), []byte(`"arguments"`), []byte(`"refusal"`)}
	responsesTextKeys = [][]byte{[]byte(`"delta"`)}
)

// Reset makes c ready for another stream, a Responses stream when responses is set.
func (c *TextCounter) Reset(responses bool) { *c = TextCounter{responses: responses} }

// Bytes returns the bytes of text counted so far.
func (c *TextCounter) Bytes() int64 { return c.n }

// Feed counts the text of the next chunk of the stream.
func (c *TextCounter) Feed(p []byte) {
	for len(p) > 0 {
		if c.inText {
			p = c.text(p)
			continue
		}
		i := bytes.IndexByte(p, ':')
		if i < 0 {
			return
		}
		if i+1 < len(p) && p[i+1] == '"' && c.counts(p[:i]) {
			c.inText = true
			i++ // the opening quote
		}
		p = p[i+1:]
	}
}

// counts reports whether key, the bytes before a colon, ends with a counted member's key.
func (c *TextCounter) counts(key []byte) bool {
	keys := deltaTextKeys
	if c.responses {
		keys = responsesTextKeys
	}
	for _, k := range keys {
		if bytes.HasSuffix(key, k) {
			return true
		}
	}
	return false
}

// text counts the bytes of a counted value from the start of p up to its closing quote, and
// returns what follows the quote (nil when the value goes on in the next chunk).
func (c *TextCounter) text(p []byte) []byte {
	i := 0
	if c.escaped {
		c.escaped, i = false, 1
	}
	for i < len(p) {
		j := bytes.IndexAny(p[i:], "\"\\")
		if j < 0 {
			break
		}
		i += j
		if p[i] == '"' {
			c.n += int64(i)
			c.inText = false
			return p[i+1:]
		}
		if i+1 == len(p) { // the escaped byte is in the next chunk
			c.escaped = true
		}
		i += 2
	}
	c.n += int64(len(p))
	return nil
}
