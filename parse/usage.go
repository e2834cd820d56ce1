package parse

import (
	"bytes"
	"sync"
)

// Usage is the token usage an answer reports, as the provider counted it.
// Found is set when any usage object was read.
type Usage struct {
	Input, Output, Cached, Reasoning int64
	// CacheWrite is the input written to the prompt cache, which alpha
	// counts apart from its input (cache_creation_input_tokens).
	CacheWrite int64
	Found      bool
}

// maxUsageObject bounds the usage object UsageScanner captures; providers'
// are a few hundred bytes.
const maxUsageObject = 1 << 10

// UsageScanner finds the token usage in an answer body or an SSE stream, fed
// in chunks of any size, without decoding the rest: it looks for members
// named "usage" or "usageMetadata" whose value is an object, captures that
// object (at most maxUsageObject bytes) and reads it with ReadUsage. Every
// provider shape is covered: beta chat's "usage" (also in a stream's last
// chunk), Responses' "response"."usage" (in response.completed), alpha's
// "usage" in a message and in the message_start and message_delta events,
// gamma's "usageMetadata". A later object's counts replace the earlier ones
// it repeats, which follows alpha's cumulative message_delta.
//
// A raw `"usage"` followed by ':' and '{' cannot occur inside a JSON string
// (its quotes would be escaped), so a match is always a member. The zero
// value is ready; Reset makes it so again. Not safe for concurrent use.
type UsageScanner struct {
	u     Usage
	match int  // bytes of the key matched; see step
	long  bool // the key matched is usageMetadata
	phase uint8
	depth int
	inStr bool
	esc   bool
	n     int
	obj   *[maxUsageObject]byte // the usage object captured so far; see capture
}

// objects holds the capture buffers. A scanner holds one only while it
// captures an object, so that a stream waiting for its next event holds none.
var objects = sync.Pool{New: func() any { return new([maxUsageObject]byte) }}

const (
	phaseKey   uint8 = iota // matching `"usage"` or `"usageMetadata"`
	phaseColon              // after the key: whitespace, then ':'
	phaseBrace              // after ':': whitespace, then '{'
	phaseValue              // inside the captured object
)

var (
	usagePrefix  = []byte(`"usage`)
	usageWord    = usagePrefix[1:] // what Feed looks for: see there
	usageKey     = []byte(`"usage"`)
	usageMetaKey = []byte(`"usageMetadata"`)
)

// Reset makes s ready for another answer.
func (s *UsageScanner) Reset() {
	s.release()
	s.u = Usage{}
	s.match, s.long, s.phase, s.depth, s.inStr, s.esc, s.n = 0, false, phaseKey, 0, false, false, 0
}

// Usage returns what was found so far.
func (s *UsageScanner) Usage() Usage { return s.u }

// Feed scans the next chunk of the answer. While no key is half matched, it
// skips to the next `usage` preceded by a quote (see indexUsageWord).
func (s *UsageScanner) Feed(p []byte) {
	for len(p) > 0 {
		if s.phase == phaseKey && s.match == 0 {
			i := indexUsageWord(p)
			if i < 0 {
				// the chunk's last bytes may begin a key that the next one ends
				for _, c := range p[max(len(p)-len(usagePrefix)+1, 0):] {
					s.key(c)
				}
				return
			}
			if i == 0 || p[i-1] != '"' {
				// Not a key's start: a quote that ended the chunk before
				// would have left a match begun.
				p = p[i+1:]
				continue
			}
			p = p[i-1:]
		}
		if s.phase == phaseValue {
			p = p[s.capture(p):]
			continue
		}
		if s.phase == phaseBrace && p[0] == '{' {
			p = p[s.value(p):]
			continue
		}
		s.step(p[0])
		p = p[1:]
	}
}

// indexUsageWord is bytes.Index(p, usageWord), found by its 'g'. A search
// stops at every occurrence of the byte it looks for: a quote is every few
// bytes of JSON (looking for the word with its quote was 3 to 4 times
// slower on a beta chat stream), a 'u' is in English text and in beta's
// "chat.completion.chunk", a 'g' is rarer in both. bytes.Index looks for
// the first byte. BenchmarkUsageScannerChatStreamNoUsage, a stream whose
// client did not ask for usage: 1.22 to 1.26 µs with bytes.Index, 0.80 to
// 0.90 this way; the whole answer of BenchmarkUsageScannerChatAnswer 0.69
// to 0.86 against 0.61 to 0.63.
func indexUsageWord(p []byte) int {
	const g = 3 // where the 'g' is in the word
	for i := g; i+2 <= len(p); {
		k := bytes.IndexByte(p[i:len(p)-1], 'g')
		if k < 0 {
			return -1
		}
		j := i + k - g
		if string(p[j:j+len(usageWord)]) == string(usageWord) {
			return j
		}
		i += k + 1
	}
	return -1
}

// step advances the search for a usage member by one byte.
func (s *UsageScanner) step(c byte) {
	switch s.phase {
	case phaseColon, phaseBrace:
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			return
		}
		if s.phase == phaseColon && c == ':' {
			s.phase = phaseBrace
			return
		}
		s.phase, s.match = phaseKey, 0
	}
	s.key(c)
}

// key matches c against the usage keys; "usage" is a prefix of
// "usageMetadata", so both are followed at once.
func (s *UsageScanner) key(c byte) {
	m := s.match
	switch {
	case m < len(usageKey)-1 && c == usageKey[m]:
		s.match++
		return
	case m == len(usageKey)-1 && c == '"' && !s.long:
		s.phase, s.match = phaseColon, 0
		return
	case m >= len(usageKey)-1 && m < len(usageMetaKey) && c == usageMetaKey[m]:
		s.match++
		s.long = true
		if s.match == len(usageMetaKey) {
			s.phase, s.match, s.long = phaseColon, 0, false
		}
		return
	}
	s.match, s.long = 0, false
	if c == '"' {
		s.match = 1
	}
}

// value begins the usage object at the start of p, and returns how many bytes
// of p it took. An object that p holds whole, within maxUsageObject, is read
// where it lies: that is a whole answer's usage, and a stream's when its event
// came in one read. Any other is captured (see capture) and read once it ends;
// what the read in place found is then dropped, so that an object that turns
// out too large for usage still counts for nothing.
func (s *UsageScanner) value(p []byte) int {
	u := s.u
	if end := readUsage(p[:min(len(p), maxUsageObject)], &u); end > 0 {
		s.u, s.phase, s.match = u, phaseKey, 0
		return end
	}
	s.phase, s.depth, s.inStr, s.esc, s.n = phaseValue, 0, false, false, 0
	if s.obj == nil {
		s.obj = objects.Get().(*[maxUsageObject]byte)
	}
	return s.capture(p)
}

// capture copies the usage object's bytes from the start of p, and returns
// how many it took: up to the object's end, which is then read, or all of p.
// An object larger than maxUsageObject is not usage and is dropped. The
// scan keeps its state in locals and copies the bytes once.
func (s *UsageScanner) capture(p []byte) int {
	depth, inStr, esc := s.depth, s.inStr, s.esc
	fit := min(len(p), len(s.obj)-s.n)
	taken, done := fit, false
	for i := 0; i < fit && !done; i++ {
		switch c := p[i]; {
		case inStr:
			inStr = esc || c != '"'
			esc = !esc && c == '\\'
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				taken, done = i+1, true
			}
		}
	}
	s.n += copy(s.obj[s.n:], p[:taken])
	s.depth, s.inStr, s.esc = depth, inStr, esc
	switch {
	case done:
		ReadUsage(s.obj[:s.n], &s.u)
		s.phase, s.match = phaseKey, 0
		s.release()
	case fit < len(p): // too large for usage: not one
		s.phase, s.match = phaseKey, 0
		s.release()
	}
	return taken
}

// release gives the capture buffer back, if the scanner holds one.
func (s *UsageScanner) release() {
	if s.obj != nil {
		objects.Put(s.obj)
		s.obj = nil
	}
}

// ReadUsage reads a usage object into u, overwriting the counts it holds:
// input (prompt_tokens, input_tokens, promptTokenCount), output
// (completion_tokens, output_tokens, candidatesTokenCount), cached
// (cache_read_input_tokens, cachedContentTokenCount, and cached_tokens in
// the input details), cache writes (cache_creation_input_tokens) and reasoning (thoughtsTokenCount, and
// reasoning_tokens in the output details). Other members are skipped; a
// broken object is read as far as it goes. It does not allocate.
func ReadUsage(obj []byte, u *Usage) { readUsage(obj, u) }

// readUsage reads the usage object at the start of obj into u, as ReadUsage
// does, and returns where the object ends: -1 when obj does not hold it whole
// and well formed.
func readUsage(obj []byte, u *Usage) int {
	u.Found = true
	last := skipWS(obj, 0) // the end of the last member read; at first, the brace
	if last >= len(obj) || obj[last] != '{' {
		return -1
	}
	last++
	for key, val, i := nextMember(obj, -1); i >= 0; key, val, i = nextMember(obj, i) {
		last = i
		switch string(key) {
		case "prompt_tokens", "input_tokens", "promptTokenCount":
			setCount(&u.Input, val)
		case "completion_tokens", "output_tokens", "candidatesTokenCount":
			setCount(&u.Output, val)
		case "cache_read_input_tokens", "cachedContentTokenCount":
			setCount(&u.Cached, val)
		case "cache_creation_input_tokens":
			setCount(&u.CacheWrite, val)
		case "thoughtsTokenCount":
			setCount(&u.Reasoning, val)
		case "prompt_tokens_details", "input_tokens_details":
			setCount(&u.Cached, Member(val, "cached_tokens"))
		case "completion_tokens_details", "output_tokens_details":
			setCount(&u.Reasoning, Member(val, "reasoning_tokens"))
		}
	}
	if last = skipWS(obj, last); last < len(obj) && obj[last] == '}' {
		return last + 1
	}
	return -1
}

// nextMember returns the key (raw, without quotes) and value of the member
// of obj after the one ending at i (-1: the first), and where it ends; the
// end is -1 when there is none or obj is broken there.
func nextMember(obj []byte, i int) (key, val []byte, end int) {
	if i < 0 {
		if i = skipWS(obj, 0); i >= len(obj) || obj[i] != '{' {
			return nil, nil, -1
		}
	} else if i = skipWS(obj, i); i >= len(obj) || obj[i] != ',' {
		return nil, nil, -1
	}
	i = skipWS(obj, i+1)
	if i >= len(obj) || obj[i] != '"' {
		return nil, nil, -1
	}
	kend, _ := skipStringLoose(obj, i)
	if kend < 0 {
		return nil, nil, -1
	}
	key = obj[i+1 : kend-1]
	if i = skipWS(obj, kend); i >= len(obj) || obj[i] != ':' {
		return nil, nil, -1
	}
	start := skipWS(obj, i+1)
	if end = skipValueLoose(obj, start); end < 0 {
		return nil, nil, -1
	}
	return key, obj[start:end], end
}

// setCount sets *n to the non-negative integer v, when v is one.
func setCount(n *int64, v []byte) {
	if x, ok := Count(v); ok {
		*n = x
	}
}

// Count reads v, a JSON value, as a non-negative integer of at most 18
// digits (so that it fits an int64); ok is false for anything else.
func Count(v []byte) (n int64, ok bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
