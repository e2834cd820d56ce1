package proxy

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// File listings. Both families list the caller's unexpired files from the store, newest
// first unless beta asks for asc; ids are ULIDs, so id order is creation order and a cursor
// is just a file id.

const (
	// alphaListDefaultLimit is the alpha page size when limit is absent (the alpha API's own).
	alphaListDefaultLimit = 20
	// betaListDefaultLimit is the beta page size when limit is absent: the most we serve, as
	// the beta API's default (10000) is above our maximum.
	betaListDefaultLimit = store.MaxListLimit
	// pageCursorPrefix starts an alpha next_page cursor: "af1_" + the last file id shown.
	pageCursorPrefix = "af1_"
	// filesBetaPrefix starts the anthropic-beta value that selects the older alpha list.
	filesBetaPrefix = "files-api-"
)

// alphaListMode is the shape of an alpha list answer.
type alphaListMode uint8

const (
	// alphaListCursor is the current shape: {data, next_page}.
	alphaListCursor alphaListMode = iota
	// alphaListLegacy is the older shape {data, first_id, last_id, has_more}, with next_page
	// as well so that a current SDK sending the files beta header keeps paging.
	alphaListLegacy
)

// filesList serves GET .../v1/files of the alpha family.
func (g *Gateway) filesList(ctx *fasthttp.RequestCtx) {
	c, ok := g.startFileCall(ctx, epFilesList)
	defer c.end()
	if !ok {
		return
	}
	q := store.ListQuery{Now: g.now(), Desc: true, Purpose: filePurpose}
	mode, ok := c.alphaListQuery(&q)
	if !ok {
		return
	}
	var files []store.File
	var hasMore bool
	var err error
	if len(ctx.QueryArgs().Peek("scope_id")) == 0 { // no uploaded file is session-scoped
		files, hasMore, err = g.opts.Store.ListFiles(c.keyID, q)
	}
	if err != nil {
		c.fail(storeError("cannot list files", err))
		return
	}
	b := acquireJSONBuf()
	*b = appendAlphaList((*b)[:0], files, hasMore, mode, q.Before != "" && q.After == "")
	c.replyJSON(*b)
	releaseJSONBuf(b)
}

// alphaListQuery reads the alpha list parameters into q: limit, page, ids (as ids[] or ids,
// repeated) and, for the older shape, after_id and before_id.
func (c *call) alphaListQuery(q *store.ListQuery) (alphaListMode, bool) {
	args := c.ctx.QueryArgs()
	mode := alphaListCursor
	if c.filesBetaHeader() {
		mode = alphaListLegacy
	}
	limit, ok := c.limitArg(args, alphaListDefaultLimit)
	if !ok {
		return mode, false
	}
	q.Limit = limit
	if args.Has("page") {
		page := args.Peek("page")
		id, found := bytes.CutPrefix(page, []byte(pageCursorPrefix))
		if !found || !store.ValidFileID(b2s(id)) {
			c.fail(badParam("page", "page: '"+string(page)+"' is not a page cursor: use the next_page of the previous answer ("+pageCursorPrefix+" followed by a file id)"))
			return mode, false
		}
		q.After = string(id)
	}
	for _, name := range [...]string{"after_id", "before_id"} {
		if !args.Has(name) {
			continue
		}
		id := args.Peek(name)
		if !store.ValidFileID(b2s(id)) {
			c.fail(badParam(name, name+": '"+string(id)+"' is not a file id"))
			return mode, false
		}
		if args.Has("page") {
			c.fail(badParam(name, name+" and page are mutually exclusive"))
			return mode, false
		}
		if name == "after_id" {
			q.After = string(id)
		} else {
			q.Before = string(id)
		}
		mode = alphaListLegacy
	}
	return c.alphaListIDs(args, q, mode)
}

// alphaListIDs reads the ids parameter, which excludes limit and every cursor. An ids
// query answers one page: nothing lies beyond it.
func (c *call) alphaListIDs(args *fasthttp.Args, q *store.ListQuery, mode alphaListMode) (alphaListMode, bool) {
	ids := args.PeekMulti("ids[]")
	ids = append(ids, args.PeekMulti("ids")...)
	if len(ids) == 0 {
		return mode, true
	}
	for _, name := range [...]string{"page", "limit", "after_id", "before_id"} {
		if args.Has(name) {
			c.fail(badParam("ids", "ids and "+name+" are mutually exclusive"))
			return mode, false
		}
	}
	q.IDs = make([]string, 0, len(ids))
	for _, id := range ids {
		if !store.ValidFileID(b2s(id)) {
			c.fail(badParam("ids", "ids: '"+string(id)+"' is not a file id"))
			return mode, false
		}
		q.IDs = append(q.IDs, string(id))
	}
	slices.Sort(q.IDs)
	if q.IDs = slices.Compact(q.IDs); len(q.IDs) > store.MaxListLimit {
		c.fail(badParam("ids", "ids: at most "+strconv.Itoa(store.MaxListLimit)+" distinct file ids, got "+strconv.Itoa(len(q.IDs))))
		return mode, false
	}
	return mode, true
}

// filesBetaHeader reports whether anthropic-beta names a files API version, which selects
// the older list shape.
func (c *call) filesBetaHeader() bool {
	found := false
	c.ctx.Request.Header.VisitAll(func(k, v []byte) {
		if found || !bytes.EqualFold(k, []byte("anthropic-beta")) {
			return
		}
		for len(v) > 0 {
			var tok []byte
			tok, v, _ = bytes.Cut(v, []byte{','})
			if bytes.HasPrefix(bytes.TrimSpace(tok), []byte(filesBetaPrefix)) {
				found = true
				return
			}
		}
	})
	return found
}

// limitArg reads the limit parameter: an integer 1..MaxListLimit, def when absent.
func (c *call) limitArg(args *fasthttp.Args, def int) (int, bool) {
	if !args.Has("limit") {
		return def, true
	}
	v := args.Peek("limit")
	n, err := strconv.Atoi(b2s(v))
	if err != nil || n < 1 || n > store.MaxListLimit || v[0] == '+' {
		c.fail(badParam("limit", "limit: '"+string(v)+"' is not an integer between 1 and "+strconv.Itoa(store.MaxListLimit)))
		return 0, false
	}
	return n, true
}

func badParam(param, msg string) *Error {
	return &Error{Status: 400, Reason: "bad_param", Param: param, Message: msg}
}

// appendAlphaList appends an alpha list answer. backward is a before_id page, which has no
// next_page: its has_more looks toward newer files.
func appendAlphaList(dst []byte, files []store.File, hasMore bool, mode alphaListMode, backward bool) []byte {
	dst = append(dst, `{"data":[`...)
	for i := range files {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendAlphaFile(dst, &files[i])
	}
	dst = append(dst, ']')
	if mode != alphaListCursor {
		dst = appendListBounds(dst, files, hasMore)
	}
	dst = append(dst, `,"next_page":`...)
	if hasMore && !backward && len(files) > 0 {
		dst = append(dst, '"')
		dst = append(dst, pageCursorPrefix...)
		dst = append(dst, files[len(files)-1].ID...)
		dst = append(dst, '"')
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// appendListBounds appends `,"first_id":...,"last_id":...,"has_more":...`.
func appendListBounds(dst []byte, files []store.File, hasMore bool) []byte {
	dst = append(dst, `,"first_id":`...)
	if len(files) > 0 {
		dst = family.AppendJSONString(dst, files[0].ID)
		dst = append(dst, `,"last_id":`...)
		dst = family.AppendJSONString(dst, files[len(files)-1].ID)
	} else {
		dst = append(dst, `null,"last_id":null`...)
	}
	dst = append(dst, `,"has_more":`...)
	return strconv.AppendBool(dst, hasMore)
}

// betaPurposes are the purposes of the beta files API. Every uploaded file has purpose
// user_data; filtering by another known purpose gives an empty list.
var betaPurposes = []string{
	"assistants", "assistants_output", "batch", "batch_output", "fine-tune",
	"fine-tune-results", "vision", "user_data", "evals",
}

// betaFilesList serves GET /v1/router/beta/v1/files: the caller's files in the beta list
// shape, with after, order, limit and purpose.
func (g *Gateway) betaFilesList(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Beta, epBetaFilesList)
	defer c.end()
	if !c.authenticate() || !c.needStore() {
		return
	}
	q := store.ListQuery{Now: g.now(), Desc: true}
	if !c.betaListQuery(&q) {
		return
	}
	files, hasMore, err := g.opts.Store.ListFiles(c.keyID, q)
	if err != nil {
		c.fail(storeError("cannot list files", err))
		return
	}
	b := acquireJSONBuf()
	*b = append((*b)[:0], `{"object":"list","data":[`...)
	for i := range files {
		if i > 0 {
			*b = append(*b, ',')
		}
		*b = appendBetaFile(*b, &files[i])
	}
	*b = append(*b, ']')
	*b = appendListBounds(*b, files, hasMore)
	*b = append(*b, '}')
	c.replyJSON(*b)
	releaseJSONBuf(b)
}

func (c *call) betaListQuery(q *store.ListQuery) bool {
	args := c.ctx.QueryArgs()
	limit, ok := c.limitArg(args, betaListDefaultLimit)
	if !ok {
		return false
	}
	q.Limit = limit
	if args.Has("order") {
		switch v := args.Peek("order"); string(v) {
		case "asc":
			q.Desc = false
		case "desc":
		default:
			c.fail(badParam("order", "order: '"+string(v)+"' is not one of asc, desc"))
			return false
		}
	}
	if args.Has("after") {
		v := args.Peek("after")
		if !store.ValidFileID(b2s(v)) {
			c.fail(badParam("after", "after: '"+string(v)+"' is not a file id"))
			return false
		}
		q.After = string(v)
	}
	if args.Has("purpose") {
		v := args.Peek("purpose")
		if !slices.Contains(betaPurposes, string(v)) {
			c.fail(badParam("purpose", "purpose: '"+string(v)+"' is not a file purpose (uploaded files have purpose user_data)"))
			return false
		}
		q.Purpose = string(v)
	}
	return true
}
