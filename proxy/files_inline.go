package proxy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// Stored files are usable in alpha messages: an image block whose source names one of the
// caller's files, {"type":"file","file_id":"file_svc_..."}, reaches the provider with the
// file inlined, {"type":"base64","media_type":"image/png","data":"..."}. The provider never
// sees our file ids, and a file of another key is "not found" before anything is sent.

// fileRefMarker is in every body that references a stored file.
var fileRefMarker = []byte(store.FileIDPrefix)

// hasFileRefs is the cheap pre-check of the messages handler: only a body that mentions
// file_svc_ is scanned for file sources. (A file id written with JSON escapes is not seen
// and goes upstream as written, where it names nothing.)
func (g *Gateway) hasFileRefs(body []byte) bool {
	return bytes.Contains(body, fileRefMarker)
}

// inliner holds the buffers of one inlining, pooled.
type inliner struct {
	refs parse.FileRefs
	src  []byte // the body without session_id, when it had one
	data []byte // the bytes of the file being inlined
	done []inlinedFile
	// The budget's share of src and data (see bodyShares.inline): src's
	// length and the largest file's size.
	srcHeld, dataHeld int
}

// inlinedFile remembers where the base64 of a file already inlined sits in the output, so
// that a file referenced again is copied rather than read again.
type inlinedFile struct {
	ref        int // index in refs.Refs
	start, end int // the source object written, in the output
}

var inlinerPool = sync.Pool{New: func() any { return new(inliner) }}

// release gives the inliner back to the pool, but for buffers past
// maxPooledBody, which go back to the heap: a pooled inliner would hold its
// largest file for good.
func (in *inliner) release() {
	in.refs.Reset()
	in.done = in.done[:0]
	in.srcHeld, in.dataHeld = 0, 0
	if cap(in.src) > maxPooledBody {
		in.src = nil
	}
	if cap(in.data) > maxPooledBody {
		in.data = nil
	}
	inlinerPool.Put(in)
}

// inlineFiles returns the body to forward for a messages call that mentions file_svc_:
// session_id removed, and every source that references a file_svc_ id replaced by the
// caller's file as base64. A reference to an unknown, expired or foreign file fails the
// call with 404; a body that inlining would take over limits.max_body_bytes fails with 413.
// The copies are counted in the request body budget (bodybudget.go) before they are made.
// Sources that reference other file ids (a provider's own) are left as they are.
func (g *Gateway) inlineFiles(c *call) ([]byte, bool) {
	if !c.needStore() {
		return nil, false
	}
	in := inlinerPool.Get().(*inliner)
	defer func() {
		in.release()
		c.releaseShare(&c.shares.inline)
	}()
	src := c.body
	if c.fields.HasSessionID() {
		in.srcHeld = len(c.body)
		if !c.reserveShare(&c.shares.inline, in.srcHeld) {
			return nil, false
		}
		in.src = parse.AppendWithoutSessionID(in.src[:0], c.body, &c.fields)
		src = in.src
	}
	if err := parse.FindFileRefs(src, &in.refs); err != nil {
		// Peek validated the body and the splice keeps it valid: this is our bug.
		c.fail(&Error{Status: 500, Reason: "inline_error", Message: "cannot read the file references", Cause: err})
		return nil, false
	}
	out, ok := growSpliced(c, orSpare(c.spliced), len(src))
	if !ok {
		return nil, false
	}
	prev := 0
	for i, ref := range in.refs.Refs {
		if !bytes.HasPrefix(ref.FileID, fileRefMarker) {
			continue
		}
		out = append(out, src[prev:ref.Start]...)
		var ok bool
		if out, ok = in.appendSource(c, out, i, len(src)-ref.End); !ok {
			c.spliced = out
			return nil, false
		}
		prev = ref.End
	}
	out = append(out, src[prev:]...)
	c.spliced = out
	return out, true
}

// appendSource appends the base64 source object of the file of refs.Refs[i] to out. rest
// is the length of the body still to come after it, for the size check.
func (in *inliner) appendSource(c *call, out []byte, i, rest int) ([]byte, bool) {
	id := in.refs.Refs[i].FileID
	for _, d := range in.done {
		if bytes.Equal(in.refs.Refs[d.ref].FileID, id) {
			var ok bool
			if out, ok = growSpliced(c, out, len(out)+d.end-d.start+rest); !ok {
				return out, false
			}
			return append(out, out[d.start:d.end]...), true
		}
	}
	now := c.g.now()
	f, err := c.g.opts.Store.GetFile(c.keyID, string(id), now)
	if err != nil {
		c.fail(inlineStoreError(id, err))
		return out, false
	}
	out, ok := growSpliced(c, out, len(out)+base64.StdEncoding.EncodedLen(int(f.Size))+len(f.MimeType)+64+rest)
	if !ok {
		return out, false
	}
	if in.dataHeld = max(in.dataHeld, int(f.Size)); !c.reserveShare(&c.shares.inline, in.srcHeld+in.dataHeld) {
		return out, false
	}
	in.data, err = c.g.opts.Store.AppendFileData(in.data[:0], c.keyID, f.ID, now)
	if err != nil {
		c.fail(inlineStoreError(id, err))
		return out, false
	}
	start := len(out)
	out = append(out, `{"type":"base64","media_type":`...)
	out = family.AppendJSONString(out, f.MimeType)
	out = append(out, `,"data":"`...)
	out = base64.StdEncoding.AppendEncode(out, in.data)
	out = append(out, `"}`...)
	in.done = append(in.done, inlinedFile{ref: i, start: start, end: len(out)})
	return out, true
}

func inlineStoreError(id []byte, err error) *Error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: 404, Reason: "file_not_found", Message: "file not found: " + string(id)}
	}
	return storeError("cannot read a referenced file", err)
}

// growSpliced makes room in out, the body being inlined, for size bytes in all: the size
// is checked against the messages body limit and reserved in the body budget first, and
// out grows at once to it, so that the copy holds no more than what was reserved.
func growSpliced(c *call, out []byte, size int) ([]byte, bool) {
	if !checkInlinedSize(c, size) || !c.reserveShare(&c.shares.spliced, size) {
		return out, false
	}
	if size > cap(out) {
		out = slices.Grow(out, size-len(out))
		if !c.reserveShare(&c.shares.spliced, cap(out)) {
			return out, false
		}
	}
	return out, true
}

// checkInlinedSize refuses a body that inlining takes over the messages body limit.
func checkInlinedSize(c *call, size int) bool {
	limit := c.st.cfg.Limits.MaxBodyBytes
	if size <= limit {
		return true
	}
	c.fail(&Error{Status: 413, Reason: "inlined_too_large",
		Message: "the request with its referenced files inlined is larger than the limit of " + strconv.Itoa(limit) + " bytes"})
	return false
}
