package parse

import "bytes"

// A file reference is a content block source that names a stored file instead of carrying
// its bytes, as the alpha Messages protocol writes it:
//
//	{"type":"image","source":{"type":"file","file_id":"file_svc_..."}}
//
// FindFileRefs finds every such source object, at any depth, with its byte span, so that
// the caller can splice another object (the file's bytes as base64) into its place without
// decoding and re-encoding the body.

// FileRef is one file reference: the value of a "source" member that is an object whose
// "type" is the string "file" and whose "file_id" is a string (the last member of each key
// counts, as in encoding/json).
type FileRef struct {
	// Start and End are the byte span [Start, End) of the source object in the body, from
	// its '{' to just past its '}'.
	Start, End int
	// FileID is the decoded value of "file_id". It points into the body, or into the
	// FileRefs' own buffer when the literal had escapes; it is valid while the body is
	// unchanged and until the next FindFileRefs or Reset of the FileRefs.
	FileID []byte

	id      span // the file_id literal, quotes included
	escaped bool
}

// FileRefs holds the file references of one body. The zero value is ready to use;
// FindFileRefs resets it, and Reset drops its references to a body while keeping its
// buffers. Not safe for concurrent use.
type FileRefs struct {
	// Refs are the references in body order. Their spans are disjoint: a file source
	// nested inside another one is not reported, since the outer one is replaced whole.
	Refs []FileRef
	buf  []byte // decoded file ids that had escapes
}

// Reset clears r, dropping every reference to the last body and keeping buffers for reuse.
func (r *FileRefs) Reset() {
	clear(r.Refs) // drop the FileID slices, which may point into a body
	r.Refs = r.Refs[:0]
	r.buf = r.buf[:0]
}

// FindFileRefs scans body, which must be one JSON value with optional whitespace around it,
// and fills r with its file references. It validates the body as Peek does (RFC 8259,
// nesting at most 10000 deep, strings may hold invalid UTF-8) and returns a *SyntaxError for
// malformed JSON; on error r is left reset. A "source" key is compared after unescaping, as
// are the "type" and "file_id" keys and the "file" value inside it.
//
// FindFileRefs does not allocate once r's buffers have grown to what the bodies need.
func FindFileRefs(body []byte, r *FileRefs) error {
	r.Reset()
	i := skipWS(body, 0)
	end, err := r.value(body, i, 0)
	if err == nil {
		if end = skipWS(body, end); end < len(body) {
			err = syntaxError(end, "unexpected data after the top-level value")
		}
	}
	if err != nil {
		r.Reset()
		return err
	}
	r.decodeIDs(body)
	return nil
}

// value validates the value at b[i] (not whitespace), records the file references inside
// it, and returns the index just past it. depth is the number of containers open around it.
func (r *FileRefs) value(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, syntaxError(i, "unexpected end of input")
	}
	switch b[i] {
	case '{':
		return r.object(b, i, depth+1)
	case '[':
		return r.array(b, i, depth+1)
	case '"':
		end, _, err := scanString(b, i)
		return end, err
	}
	return scanScalar(b, i)
}

// object scans the object whose '{' is at b[i], which is at nesting depth depth.
func (r *FileRefs) object(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxError(i, errTooDeep)
	}
	if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxError(i, "expected a string key")
		}
		keyEnd, escaped, err := scanString(b, i)
		if err != nil {
			return keyEnd, err
		}
		source := isKey(b[i+1:keyEnd-1], escaped, "source")
		if i = skipWS(b, keyEnd); i >= len(b) || b[i] != ':' {
			return i, syntaxError(i, "expected ':' after object key")
		}
		start := skipWS(b, i+1)
		before := len(r.Refs)
		end, err := r.value(b, start, depth)
		if err != nil {
			return end, err
		}
		if source && b[start] == '{' {
			r.source(b, start, end, before)
		}
		var closed bool
		if i, closed, err = afterElement(b, end, '}'); err != nil || closed {
			return i, err
		}
	}
}

// array scans the array whose '[' is at b[i], which is at nesting depth depth.
func (r *FileRefs) array(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxError(i, errTooDeep)
	}
	if i = skipWS(b, i+1); i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := r.value(b, i, depth)
		if err != nil {
			return end, err
		}
		var closed bool
		if i, closed, err = afterElement(b, end, ']'); err != nil || closed {
			return i, err
		}
	}
}

// source records the validated object b[start:end], the value of a "source" member, when
// it is a file source; the references found inside it (from index before on) then give way.
func (r *FileRefs) source(b []byte, start, end, before int) {
	obj := b[start:end]
	typ := Member(obj, "type")
	if len(typ) < 2 || typ[0] != '"' || !isKey(typ[1:len(typ)-1], bytes.IndexByte(typ, '\\') >= 0, "file") {
		return
	}
	id := Member(obj, "file_id")
	if len(id) < 2 || id[0] != '"' {
		return
	}
	off := subsliceOffset(obj, id)
	clear(r.Refs[before:])
	r.Refs = append(r.Refs[:before], FileRef{
		Start:   start,
		End:     end,
		id:      span{start + off, start + off + len(id)},
		escaped: bytes.IndexByte(id, '\\') >= 0,
	})
}

// subsliceOffset returns the offset of sub within s; sub must be a subslice of s, as
// Member's results are of its argument.
func subsliceOffset(s, sub []byte) int {
	return cap(s) - cap(sub)
}

// isKey reports whether the content of a string literal, given without its quotes, decodes
// to key.
func isKey(raw []byte, escaped bool, key string) bool {
	if !escaped {
		return string(raw) == key
	}
	return keyEqual(raw, key)
}

// decodeIDs sets the FileID of every reference, decoding escaped ids into r.buf.
func (r *FileRefs) decodeIDs(b []byte) {
	need := 0
	for i := range r.Refs {
		if r.Refs[i].escaped {
			need += r.Refs[i].id.end - r.Refs[i].id.start
		}
	}
	// Decoded values are never longer than their literals, so with this much room no append
	// below moves r.buf, and the slices taken from it stay valid.
	if cap(r.buf) < need {
		r.buf = make([]byte, 0, need)
	}
	for i := range r.Refs {
		ref := &r.Refs[i]
		inner := b[ref.id.start+1 : ref.id.end-1]
		if !ref.escaped {
			ref.FileID = inner
			continue
		}
		n := len(r.buf)
		r.buf = appendUnescapedInner(r.buf, inner)
		ref.FileID = r.buf[n:len(r.buf):len(r.buf)]
	}
}
