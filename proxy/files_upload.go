package proxy

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/clientconn"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// Upload limits (spec part 8).
const (
	maxUploadFileBytes = 8 << 20                         // the file's bytes
	maxUploadBodyBytes = maxUploadFileBytes + (64 << 10) // the whole multipart body
	minExpiresIn       = 3600                            // expires_in_seconds, one hour
	maxExpiresIn       = 7776000                         // ninety days
)

const (
	// uploadFormBudget bounds what the form may hold besides the file's bytes: it is
	// granted afresh for the headers of every part and for a field's value, so a part
	// header is never held beyond it.
	uploadFormBudget = 64 << 10
	// maxFieldValue is the longest value of a field other than the file.
	maxFieldValue = 64
	// sniffLen is how much of the file decides its type.
	sniffLen = 512
)

var (
	errUploadTooLarge = errors.New("upload body over its limit")
	errFormTooLarge   = errors.New("part header or form field over its limit")
	errUnfinished     = errors.New("BUG: the store did not call FinishFile")
)

// filesUpload serves POST .../v1/files: a multipart form with exactly one file field (a PNG,
// JPEG, GIF or WebP image of at most 8 MiB) and an optional expires_in_seconds. The file's
// bytes are streamed into the store, which acknowledges only once they are durable.
func (g *Gateway) filesUpload(ctx *fasthttp.RequestCtx) {
	c := g.acquireCall(ctx, family.Alpha, epFilesUpload)
	defer c.end()
	u := uploadPool.Get().(*upload)
	defer u.release()
	u.c = c
	if c.refuseIdempotencyKey() && c.authenticate() && c.knownGroup() && c.refuseWorkspace() &&
		c.needStore() && u.checkHeaders() {
		u.serve()
	}
	u.finishBody()
}

// upload is the state of one upload while its form is read. Pooled; see filesUpload.
type upload struct {
	c    *call
	body uploadBody
	mr   *multipart.Reader

	expiresIn int64 // seconds; 0 until the field is read
	filename  string
	mimeType  string
	head      [sniffLen]byte
	headLen   int // bytes of head that hold the file's start
	headOff   int // bytes of head already passed on
	file      *multipart.Part
	finished  bool // the store called FinishFile
}

var uploadPool = sync.Pool{New: func() any { return new(upload) }}

func (u *upload) release() {
	*u = upload{}
	uploadPool.Put(u)
}

// checkHeaders refuses a body that is not multipart/form-data or that declares a length
// over the limit, before any of it is read.
func (u *upload) checkHeaders() bool {
	c := u.c
	req := &c.ctx.Request
	boundary := uploadBoundary(&req.Header)
	if len(boundary) == 0 {
		c.fail(&Error{Status: 400, Reason: "not_multipart",
			Message: "the upload must be a multipart/form-data body with a file field"})
		return false
	}
	if cl := req.Header.ContentLength(); cl > maxUploadBodyBytes {
		c.fail(uploadBodyTooLarge())
		return false
	}
	r := c.ctx.RequestBodyStream()
	if r == nil {
		r = bytes.NewReader(req.Body())
	}
	u.body = uploadBody{r: r, left: maxUploadBodyBytes + 1, budget: -1, conn: c.boundChunked(clientconn.ChunkSlack)}
	u.mr = multipart.NewReader(&u.body, string(boundary))
	return true
}

// uploadBoundary returns the multipart boundary of a request's Content-Type.
// fasthttp's reader knows only the lower-case form that clients send; a
// media type and its parameters' names are case-insensitive, and a value
// may be quoted, so what it does not read is read by package mime.
func uploadBoundary(h *fasthttp.RequestHeader) []byte {
	if b := h.MultipartFormBoundary(); len(b) > 0 {
		return b
	}
	mt, params, err := mime.ParseMediaType(string(h.ContentType()))
	if err != nil || mt != "multipart/form-data" {
		return nil
	}
	return []byte(params["boundary"])
}

func uploadBodyTooLarge() *Error {
	return &Error{Status: 413, Reason: "upload_too_large",
		Message: "the upload body is larger than the limit of " + strconv.Itoa(maxUploadBodyBytes) + " bytes (8 MiB of file and 64 KiB of form)"}
}

func uploadFileTooLarge() *Error {
	return &Error{Status: 413, Reason: "file_too_large",
		Message: "the file is larger than the limit of " + strconv.Itoa(maxUploadFileBytes) + " bytes (8 MiB)"}
}

// serve reads the form up to the file and streams the file's bytes straight into the
// store. The rest of the form, which the SDKs send after the file, is read by FinishFile
// once the bytes are written and before the store commits them: a bad rest fails the
// upload, and the store keeps nothing.
func (u *upload) serve() {
	c := u.c
	if err := u.readToFile(); err != nil {
		c.fail(u.asError(err))
		return
	}
	f := store.File{Owner: c.keyID, Filename: u.filename, MimeType: u.mimeType, Purpose: filePurpose, Created: c.g.now()}
	f, err := c.g.opts.Store.PutFile(f, (*uploadFile)(u), maxUploadFileBytes)
	if err == nil && !u.finished {
		// An engine that ignores FileFinisher stored the file without its expiry and
		// without the rest of the form: take it back.
		err = errors.Join(errUnfinished, c.g.opts.Store.DeleteFile(f.Owner, f.ID))
	}
	if err != nil {
		c.fail(u.asError(err))
		return
	}
	b := acquireJSONBuf()
	*b = appendAlphaFile((*b)[:0], &f)
	c.replyJSON(*b)
	releaseJSONBuf(b)
}

// asError maps what went wrong while reading and storing an upload to the client's error.
// Errors of the client's body were made *Error where they were met (see formError).
func (u *upload) asError(err error) *Error {
	var e *Error
	switch {
	case u.body.exceeded:
		return uploadBodyTooLarge()
	case u.c.chunkedTooLarge():
		return chunkFramingTooLarge()
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrTooLarge):
		return uploadFileTooLarge()
	}
	return storeError("cannot store the file", err)
}

// formError turns an error met while reading the multipart body into the client's error:
// a limit, a failed read of the connection, or a malformed body.
func (u *upload) formError(err error) *Error {
	switch {
	case u.body.exceeded:
		return uploadBodyTooLarge()
	case u.c.chunkedTooLarge():
		return chunkFramingTooLarge()
	case u.body.overBudget:
		return &Error{Status: 413, Reason: "form_too_large",
			Message: "a part header or form field is larger than the limit of " + strconv.Itoa(uploadFormBudget) + " bytes"}
	case u.body.readErr != nil:
		return &Error{Status: 400, Reason: "body_read", Message: "cannot read the upload body", Cause: redacted{err}}
	}
	return &Error{Status: 400, Reason: "bad_multipart", Message: "malformed multipart body: " + err.Error(), Cause: redacted{err}}
}

// readToFile reads the form up to the file field and the first bytes of the file, which
// decide its type.
func (u *upload) readToFile() error {
	for {
		p, err := u.nextPart()
		if err == io.EOF {
			return &Error{Status: 400, Reason: "no_file", Param: "file", Message: "file: a file field is required"}
		}
		if err != nil {
			return err
		}
		if !isFilePart(p) {
			if err := u.readField(p); err != nil {
				return err
			}
			continue
		}
		return u.startFile(p)
	}
}

// nextPart moves to the next part, its headers read within the form budget.
func (u *upload) nextPart() (*multipart.Part, error) {
	u.body.budget = uploadFormBudget
	p, err := u.mr.NextRawPart()
	u.body.budget = -1
	if err != nil && err != io.EOF {
		return nil, u.formError(err)
	}
	return p, err
}

// isFilePart reports whether p is a file field: one with a filename, or named "file".
func isFilePart(p *multipart.Part) bool {
	return p.FormName() == "file" || p.FileName() != ""
}

// readField reads a form field other than the file.
func (u *upload) readField(p *multipart.Part) error {
	name := p.FormName()
	if name != "expires_in_seconds" {
		return &Error{Status: 400, Reason: "unknown_field", Param: name,
			Message: "unknown form field '" + name + "': the form takes file and expires_in_seconds"}
	}
	if u.expiresIn != 0 {
		return &Error{Status: 400, Reason: "bad_param", Param: name, Message: "expires_in_seconds: given more than once"}
	}
	var buf [maxFieldValue + 1]byte
	u.body.budget = uploadFormBudget
	n, err := io.ReadFull(p, buf[:])
	u.body.budget = -1
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return u.formError(err)
	}
	v := strings.TrimSpace(string(buf[:n]))
	secs, perr := strconv.ParseInt(v, 10, 64)
	if n > maxFieldValue || perr != nil || secs < minExpiresIn || secs > maxExpiresIn || v[0] == '+' {
		return &Error{Status: 400, Reason: "bad_expires_in", Param: name,
			Message: "expires_in_seconds: '" + strings.ToValidUTF8(v, "") + "' is not an integer between 3600 and 7776000"}
	}
	u.expiresIn = secs
	return nil
}

// startFile checks the file field and reads the first bytes of its content.
func (u *upload) startFile(p *multipart.Part) error {
	if p.FormName() != "file" {
		return &Error{Status: 400, Reason: "bad_file_field", Param: p.FormName(),
			Message: "file field '" + p.FormName() + "': the file must be sent in the field named file"}
	}
	u.file = p
	n, err := io.ReadFull(p, u.head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return u.formError(err)
	}
	u.headLen = n
	sniffed := sniffImage(u.head[:n])
	switch {
	case n == 0:
		return &Error{Status: 400, Reason: "empty_file", Param: "file", Message: "file: the file is empty"}
	case sniffed == "":
		return &Error{Status: 400, Reason: "file_type", Param: "file",
			Message: "file: unsupported file type: only PNG, JPEG, GIF and WebP images are accepted"}
	}
	if declared := declaredType(p.Header.Get("Content-Type")); declared != "" && declared != sniffed {
		return &Error{Status: 400, Reason: "file_type_mismatch", Param: "file",
			Message: "file: the declared type " + declared + " does not match the file's content, which is " + sniffed}
	}
	u.mimeType = sniffed
	u.filename = uploadFilename(p.FileName(), sniffed)
	if len(u.filename) > store.MaxFieldLen {
		return &Error{Status: 400, Reason: "bad_filename", Param: "file",
			Message: "file: the filename is longer than " + strconv.Itoa(store.MaxFieldLen) + " bytes"}
	}
	return nil
}

// finishForm reads the parts after the file: only expires_in_seconds may follow.
func (u *upload) finishForm() error {
	for {
		p, err := u.nextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if isFilePart(p) {
			return &Error{Status: 400, Reason: "two_files", Param: "file",
				Message: "file: exactly one file field is accepted, got more"}
		}
		if err := u.readField(p); err != nil {
			return err
		}
	}
}

// uploadFile is what the store reads: the file's content, the sniffed head and then the
// rest of the part, and, as a store.FileFinisher, the rest of the form.
type uploadFile upload

func (r *uploadFile) Read(p []byte) (int, error) {
	u := (*upload)(r)
	if u.headOff < u.headLen {
		n := copy(p, u.head[u.headOff:u.headLen])
		u.headOff += n
		return n, nil
	}
	n, err := u.file.Read(p)
	if err != nil && err != io.EOF {
		return n, u.formError(err)
	}
	return n, err
}

// FinishFile reads the parts after the file and sets the expiry the form asked for, or the
// configured default. A bad rest of the form fails the upload with the client's error.
func (r *uploadFile) FinishFile(f *store.File) error {
	u := (*upload)(r)
	u.finished = true
	if err := u.finishForm(); err != nil {
		return err
	}
	expiresIn := u.expiresIn
	if expiresIn == 0 {
		expiresIn = int64(u.c.st.cfg.Files.DefaultExpiresIn.D() / time.Second)
	}
	f.Expires = f.Created.Add(time.Duration(expiresIn) * time.Second)
	return nil
}

// finishBody leaves the connection in order once the answer is set. A rest of the body up
// to clientconn.MaxQuietDrain bytes (an epilogue after a complete form, or a small refused upload) is
// read and dropped, and the connection serves the next request. A longer rest is not
// read: the connection is handed to a lingering close (clientconn.CloseAfterAnswer), which lets the client read the answer
// before the connection closes.
func (u *upload) finishBody() {
	u.c.bodyDone = true // the upload settles its body itself
	ctx := u.c.ctx
	r := ctx.RequestBodyStream()
	if r == nil {
		return
	}
	if cl := ctx.Request.Header.ContentLength(); (cl < 0 || int64(cl)-u.body.consumed() <= clientconn.MaxQuietDrain) && u.c.drainQuietly(r) {
		return
	}
	clientconn.CloseAfterAnswer(ctx)
}

// uploadBody reads the request body, failing once more than maxUploadBodyBytes have been
// read, or more than budget bytes while budget is not negative.
type uploadBody struct {
	r      io.Reader
	left   int64 // bytes that may still be read, one more than the limit allows
	budget int64 // bytes the current step of the form may read; negative: no bound
	// exceeded, overBudget and readErr tell why reading failed: the body limit, the
	// budget, or the connection.
	exceeded   bool
	overBudget bool
	readErr    error
	// conn bounds a chunked body's framing as its bytes are read (see
	// clientconn.Conn.BoundChunked); nil for a body of declared length.
	conn *clientconn.Conn
}

// consumed returns how many bytes of the body have been read through b.
func (b *uploadBody) consumed() int64 {
	if b.r == nil {
		return 0
	}
	return maxUploadBodyBytes + 1 - b.left
}

func (b *uploadBody) Read(p []byte) (int, error) {
	if b.budget == 0 {
		b.overBudget = true
		return 0, errFormTooLarge
	}
	if b.budget > 0 && int64(len(p)) > b.budget {
		p = p[:b.budget]
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.conn != nil {
		b.conn.CreditChunked(n)
	}
	if b.budget > 0 {
		b.budget -= int64(n)
	}
	if b.left <= 0 {
		b.exceeded = true
		return n, errUploadTooLarge
	}
	if err != nil && err != io.EOF {
		b.readErr = err
	}
	return n, err
}

// sniffImage returns the type of an image by its first bytes: PNG, JPEG, GIF or WebP, or "".
func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// declaredType normalizes a part's Content-Type: "" when absent or generic
// (application/octet-stream, which the SDKs send for a plain reader), else the lower-case
// media type, image/jpg read as image/jpeg. An unparsable value stays as written, so that
// it never matches.
func declaredType(v string) string {
	if strings.TrimSpace(v) == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return strings.TrimSpace(v)
	}
	switch mt {
	case "application/octet-stream":
		return ""
	case "image/jpg", "image/pjpeg":
		return "image/jpeg"
	}
	return mt
}

// uploadFilename keeps the last path component of the uploaded name; an empty name
// becomes "unnamed" with the extension of the type.
func uploadFilename(name, mimeType string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" || name == "." || name == ".." {
		return "unnamed" + imageExt(mimeType)
	}
	return strings.ToValidUTF8(name, "\uFFFD")
}

func imageExt(mimeType string) string {
	switch mimeType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	}
	return ""
}
