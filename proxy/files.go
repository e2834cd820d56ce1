package proxy

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// User-data files (issue 4). Alpha serves upload, list, metadata, content and delete under
// every alpha base; beta serves the list of the same files in its own shape. A file belongs
// to the key that uploaded it: for any other key it does not exist. See docs/files.md.

// filePurpose is the only storage kind: every uploaded file is user data.
const filePurpose = "user_data"

// betaFilesPath is the beta family's file list.
const betaFilesPath = "/v1/router/beta/v1/files"

func (g *Gateway) routeFiles(r *router.Router) {
	for _, base := range alphaBases {
		r.POST(base+"/v1/files", g.filesUpload)
		r.GET(base+"/v1/files", g.filesList)
		r.GET(base+"/v1/files/{file_id}", g.filesGet)
		r.DELETE(base+"/v1/files/{file_id}", g.filesDelete)
		r.GET(base+"/v1/files/{file_id}/content", g.filesContent)
	}
	r.GET(betaFilesPath, g.betaFilesList)
}

// startFileCall acquires the call of an alpha file endpoint and runs the checks they all
// share: the caller's key, the {group} of the base, no workspace, a store. On false the
// client has its answer; the call must still be ended.
func (g *Gateway) startFileCall(ctx *fasthttp.RequestCtx, ep endpoint) (*call, bool) {
	c := g.acquireCall(ctx, family.Alpha, ep)
	ok := c.authenticate() && c.knownGroup() && c.refuseWorkspace() && c.needStore()
	return c, ok
}

// startOwnedFileCall starts a call on one file: the checks of startFileCall, then the
// file_id of the path, which must name one of the caller's unexpired files.
func (g *Gateway) startOwnedFileCall(ctx *fasthttp.RequestCtx, ep endpoint) (*call, store.File, bool) {
	c, ok := g.startFileCall(ctx, ep)
	if !ok {
		return c, store.File{}, false
	}
	id, ok := c.fileIDParam()
	if !ok {
		return c, store.File{}, false
	}
	f, ok := c.ownedFile(id)
	return c, f, ok
}

// knownGroup refuses an /alpha/{group} base whose group is not configured: files are not
// routed, but a typo in a base URL should fail here as it does for messages.
func (c *call) knownGroup() bool {
	group := groupParam(c.ctx)
	if group == nil {
		return true
	}
	if _, ok := c.st.groups[b2s(group)]; ok {
		return true
	}
	c.fail(&Error{Status: 404, Reason: "group_unknown", Message: "unknown group '" + string(group) + "'"})
	return false
}

// workspaceHeaders select a workspace on the alpha API: the spec's neutral name and the one
// the alpha SDKs send. Workspaces are not supported, so a non-empty value is refused.
var workspaceHeaders = [...]string{"alpha-workspace-id", "anthropic-workspace-id"}

func (c *call) refuseWorkspace() bool {
	for _, h := range workspaceHeaders {
		if len(bytes.TrimSpace(c.ctx.Request.Header.Peek(h))) > 0 {
			c.fail(&Error{Status: 400, Reason: "workspace", Param: h,
				Message: "workspaces are not supported: the " + h + " header must be absent or empty"})
			return false
		}
	}
	return true
}

// fileIDParam returns the {file_id} path segment, refusing one that is not a file id.
func (c *call) fileIDParam() (string, bool) {
	id, _ := c.ctx.UserValue("file_id").(string)
	if !store.ValidFileID(id) {
		c.fail(&Error{Status: 400, Reason: "bad_file_id", Param: "file_id",
			Message: "file_id: '" + id + "' is not a file id (file_svc_ followed by 26 Crockford base32 characters)"})
		return "", false
	}
	return id, true
}

// ownedFile loads the metadata of the caller's unexpired file id. Another key's file, an
// expired one and an unknown id are all the same "not found".
func (c *call) ownedFile(id string) (store.File, bool) {
	f, err := c.g.opts.Store.GetFile(c.keyID, id, c.g.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.fail(fileNotFound(id))
		return f, false
	case err != nil:
		c.fail(storeError("cannot read the file record", err))
		return f, false
	}
	return f, true
}

func fileNotFound(id string) *Error {
	return &Error{Status: 404, Reason: "file_not_found", Message: "file not found: " + id}
}

// filesGet answers the metadata of one of the caller's files.
func (g *Gateway) filesGet(ctx *fasthttp.RequestCtx) {
	c, f, ok := g.startOwnedFileCall(ctx, epFilesGet)
	defer c.end()
	if !ok {
		return
	}
	b := acquireJSONBuf()
	*b = appendAlphaFile((*b)[:0], &f)
	c.replyJSON(*b)
	releaseJSONBuf(b)
}

// filesDelete removes one of the caller's files, bytes included.
func (g *Gateway) filesDelete(ctx *fasthttp.RequestCtx) {
	// The gateway's clock decides expiry for every call, so look first: a file expired by
	// that clock is gone even if the store's clock has not reached its expiry yet.
	c, f, ok := g.startOwnedFileCall(ctx, epFilesDelete)
	defer c.end()
	if !ok {
		return
	}
	id := f.ID
	err := g.opts.Store.DeleteFile(c.keyID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.fail(fileNotFound(id))
		return
	case err != nil:
		c.fail(storeError("cannot delete the file", err))
		return
	}
	b := acquireJSONBuf()
	*b = append((*b)[:0], `{"id":`...)
	*b = family.AppendJSONString(*b, id)
	*b = append(*b, `,"type":"file_deleted"}`...)
	c.replyJSON(*b)
	releaseJSONBuf(b)
}

// filesContent refuses every download: uploaded files are never downloadable. The owner
// is told so; anyone else is told the file does not exist. No byte of a file is read.
func (g *Gateway) filesContent(ctx *fasthttp.RequestCtx) {
	c, f, ok := g.startOwnedFileCall(ctx, epFilesContent)
	defer c.end()
	if !ok {
		return
	}
	c.fail(&Error{Status: 403, Reason: "not_downloadable",
		Message: "file " + f.ID + " is not downloadable: uploaded files can be referenced in messages but never downloaded"})
}

// replyJSON answers 200 with body, which is copied.
func (c *call) replyJSON(body []byte) {
	c.status = 200
	c.ctx.Response.Header.SetContentType("application/json")
	c.setRequestIDHeader()
	c.ctx.Response.SetBody(body)
}

// jsonBufPool holds the buffers answers are built in; see acquireJSONBuf.
var jsonBufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledJSONBuf bounds the buffers kept for reuse.
const maxPooledJSONBuf = 256 << 10

// acquireJSONBuf returns an empty buffer; releaseJSONBuf takes it back once its bytes have
// been copied out.
func acquireJSONBuf() *[]byte { return jsonBufPool.Get().(*[]byte) }

func releaseJSONBuf(b *[]byte) {
	if cap(*b) > maxPooledJSONBuf {
		return
	}
	*b = (*b)[:0]
	jsonBufPool.Put(b)
}

// appendAlphaFile appends the alpha file object of f.
func appendAlphaFile(dst []byte, f *store.File) []byte {
	dst = append(dst, `{"id":`...)
	dst = family.AppendJSONString(dst, f.ID)
	dst = append(dst, `,"type":"file","filename":`...)
	dst = family.AppendJSONString(dst, f.Filename)
	dst = append(dst, `,"mime_type":`...)
	dst = family.AppendJSONString(dst, f.MimeType)
	dst = append(dst, `,"size_bytes":`...)
	dst = strconv.AppendInt(dst, f.Size, 10)
	dst = append(dst, `,"created_at":`...)
	dst = appendRFC3339(dst, f.Created)
	dst = append(dst, `,"downloadable":false,"expires_at":`...)
	if f.Expires.IsZero() {
		dst = append(dst, "null"...)
	} else {
		dst = appendRFC3339(dst, f.Expires)
	}
	return append(dst, '}')
}

// appendBetaFile appends the beta file object of f.
func appendBetaFile(dst []byte, f *store.File) []byte {
	dst = append(dst, `{"id":`...)
	dst = family.AppendJSONString(dst, f.ID)
	dst = append(dst, `,"object":"file","bytes":`...)
	dst = strconv.AppendInt(dst, f.Size, 10)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, f.Created.Unix(), 10)
	dst = append(dst, `,"expires_at":`...)
	if f.Expires.IsZero() {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, f.Expires.Unix(), 10)
	}
	dst = append(dst, `,"filename":`...)
	dst = family.AppendJSONString(dst, f.Filename)
	dst = append(dst, `,"purpose":`...)
	dst = family.AppendJSONString(dst, f.Purpose)
	return append(dst, `,"status":"processed","status_details":null}`...)
}

// rfc3339Micro is RFC 3339 in UTC with microseconds, as the alpha API writes times.
const rfc3339Micro = "2006-01-02T15:04:05.000000Z07:00"

func appendRFC3339(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, rfc3339Micro)
	return append(dst, '"')
}
