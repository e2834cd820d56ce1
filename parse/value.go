package parse

// maxDepth is the deepest nesting of objects and arrays that Peek accepts, counting the
// top-level object. It is encoding/json's limit, so Peek accepts what json.Valid accepts.
const maxDepth = 10000

// nesting is the stack of containers open inside one member value, one bit per level
// (1 for an array), so validating a value of any depth needs no recursion. Its words are kept
// between uses.
type nesting struct {
	words []uint64
	depth int
}

// push opens a container; it reports false when that would nest deeper than maxDepth.
func (n *nesting) push(array bool) bool {
	if 1+n.depth+1 > maxDepth { // the top-level object, the open levels, the new one
		return false
	}
	w := n.depth >> 6
	if w == len(n.words) {
		n.words = append(n.words, 0)
	}
	bit := uint64(1) << (n.depth & 63)
	if array {
		n.words[w] |= bit
	} else {
		n.words[w] &^= bit
	}
	n.depth++
	return true
}

// inArray reports whether the innermost open container is an array.
func (n *nesting) inArray() bool {
	d := n.depth - 1
	return n.words[d>>6]>>(d&63)&1 == 1
}

// skipValue validates the JSON value that starts at b[i] (not whitespace) and returns the
// index just past it.
func skipValue(b []byte, i int, n *nesting) (int, error) {
	n.depth = 0
	for {
		end, opened, err := openValue(b, i, n)
		if err != nil || (!opened && n.depth == 0) {
			return end, err
		}
		i = end
		if opened {
			continue
		}
		if i, err = closeValues(b, i, n); err != nil || n.depth == 0 {
			return i, err
		}
	}
}

// openValue scans the value at b[i]. A scalar or an empty container is scanned whole; a
// non-empty container is pushed, opened is true and i is left at its first element's value.
func openValue(b []byte, i int, n *nesting) (end int, opened bool, err error) {
	if i >= len(b) {
		return i, false, syntaxError(i, "unexpected end of input")
	}
	c := b[i]
	switch c {
	case '"':
		end, _, err = scanString(b, i)
		return end, false, err
	case '{', '[':
	default:
		end, err = scanScalar(b, i)
		return end, false, err
	}
	if !n.push(c == '[') {
		return i, false, syntaxError(i, errTooDeep)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
		n.depth--
		return i + 1, false, nil
	}
	if c == '{' {
		end, err = scanKey(b, i)
		return end, true, err
	}
	return i, true, nil
}

// closeValues is called after a value inside an open container ends at i. It closes the
// containers that end there and returns where the next element's value starts, or the end
// of the outermost container once n.depth is 0.
func closeValues(b []byte, i int, n *nesting) (int, error) {
	for n.depth > 0 {
		i = skipWS(b, i)
		if i >= len(b) {
			return i, syntaxError(i, "unexpected end of input")
		}
		array := n.inArray()
		switch c := b[i]; {
		case c == ',':
			i = skipWS(b, i+1)
			if array {
				return i, nil
			}
			return scanKey(b, i)
		case array && c == ']', !array && c == '}':
			n.depth--
			i++
		case array:
			return i, syntaxError(i, "expected ',' or ']' after array element")
		default:
			return i, syntaxError(i, "expected ',' or '}' after object member")
		}
	}
	return i, nil
}

// scanKey scans `"key" :` at b[i] and returns where the member's value starts.
func scanKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, syntaxError(i, "expected a string key")
	}
	i, _, err := scanString(b, i)
	if err != nil {
		return i, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, syntaxError(i, "expected ':' after object key")
	}
	return skipWS(b, i+1), nil
}
