package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/gateway/store"
)

// Test images: the signatures the gateway sniffs, followed by filler.
var (
	pngHead  = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	jpegHead = "\xff\xd8\xff\xe0\x00\x10JFIF\x00"
	gifHead  = "GIF89a\x01\x00\x01\x00"
	webpHead = "RIFF\x24\x00\x00\x00WEBPVP8 "
)

// testImage returns an image file of size bytes that starts with head.
func testImage(head string, size int) []byte {
	b := make([]byte, size)
	n := copy(b, head)
	for i := n; i < size; i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// formPart is one part of a multipart upload: a file when filename or contentType is set,
// else a plain field.
type formPart struct {
	name, filename, contentType string
	data                        []byte
	pad                         int // bytes of an extra part header
}

func filePart(filename, contentType string, data []byte) formPart {
	return formPart{name: "file", filename: filename, contentType: contentType, data: data}
}

func fieldPart(name, value string) formPart { return formPart{name: name, data: []byte(value)} }

// multipartBody encodes parts and returns the body and its Content-Type.
func multipartBody(parts ...formPart) ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		disp := fmt.Sprintf(`form-data; name="%s"`, p.name)
		if p.filename != "" {
			disp += fmt.Sprintf(`; filename="%s"`, p.filename)
		}
		h.Set("Content-Disposition", disp)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		if p.pad > 0 {
			h.Set("X-Pad", strings.Repeat("p", p.pad))
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			panic(err)
		}
		pw.Write(p.data)
	}
	w.Close()
	return buf.Bytes(), w.FormDataContentType()
}

// maxPaged bounds what the tests read through a pager, so that a cursor that does not
// move fails the test instead of hanging it.
const maxPaged = 1000

// filesHTTP is the plain HTTP client of the file tests: net/http, as the SDKs use.
var filesHTTP = &http.Client{Timeout: time.Minute}

// send makes one request with net/http. A body of type io.Reader other than *bytes.Reader
// goes out chunked.
func (e *testEnv) send(method, path string, headers map[string]string, contentType string, body io.Reader) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := filesHTTP.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// uploadParts posts a multipart form to the alpha upload path under base.
func (e *testEnv) uploadParts(key string, headers map[string]string, parts ...formPart) (int, []byte) {
	e.t.Helper()
	body, ct := multipartBody(parts...)
	h := map[string]string{"Authorization": "Bearer " + key}
	for k, v := range headers {
		h[k] = v
	}
	status, _, b := e.send("POST", "/v1/router/alpha/v1/files", h, ct, bytes.NewReader(body))
	return status, b
}

// alphaFile is the alpha file object as the gateway writes it.
type alphaFile struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Filename     string  `json:"filename"`
	MimeType     string  `json:"mime_type"`
	SizeBytes    int64   `json:"size_bytes"`
	CreatedAt    string  `json:"created_at"`
	Downloadable *bool   `json:"downloadable"`
	ExpiresAt    *string `json:"expires_at"`
}

// mustUpload uploads data as a PNG-named file of key and returns its file object.
func (e *testEnv) mustUpload(key string, data []byte, extra ...formPart) alphaFile {
	e.t.Helper()
	status, b := e.uploadParts(key, nil, append([]formPart{filePart("pic.png", "", data)}, extra...)...)
	if status != 200 {
		e.t.Fatalf("upload: %d %s", status, b)
	}
	var f alphaFile
	if err := json.Unmarshal(b, &f); err != nil {
		e.t.Fatalf("upload answer %s: %v", b, err)
	}
	return f
}

// fileCount returns how many files the store holds.
func (e *testEnv) fileCount() int64 {
	n, _ := e.store.FileStats()
	return n
}

// alphaClient is an anthropic-sdk-go client of the gateway for key, on the given alpha
// base ("/v1/router/alpha", "/alpha" or "/alpha/{group}").
func (e *testEnv) alphaClient(base, key string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(e.base + base), aoption.WithAuthToken(key), aoption.WithAPIKey(""),
		aoption.WithMaxRetries(0),
	}, opts...)...)
}

func (e *testEnv) betaClient(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.base+"/v1/router/beta/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// sdkStatus returns the HTTP status of an SDK error, or 0.
func sdkStatus(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode
	}
	return 0
}

func TestFilesAlphaSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, base := range []string{"/v1/router/alpha", "/alpha", "/alpha/one"} {
		t.Run(base, func(t *testing.T) {
			cl := e.alphaClient(base, keyA)
			data := testImage(pngHead, 1000)
			before := time.Now()
			up, err := cl.Files.Upload(ctx, anthropic.FileUploadParams{
				File:             anthropic.File(bytes.NewReader(data), "dir/cat.png", "image/png"),
				ExpiresInSeconds: anthropic.Int(7200),
			})
			if err != nil {
				t.Fatal(err)
			}
			if !store.ValidFileID(up.ID) || up.Filename != "cat.png" || up.MimeType != "image/png" ||
				up.SizeBytes != 1000 || up.Downloadable || up.Type != "file" {
				t.Fatalf("uploaded: %+v", up)
			}
			if d := up.ExpiresAt.Sub(up.CreatedAt); d != 2*time.Hour {
				t.Fatalf("expires_at - created_at = %v; want 2h", d)
			}
			if up.CreatedAt.Before(before.Add(-time.Second)) || up.CreatedAt.After(time.Now().Add(time.Second)) {
				t.Fatalf("created_at %v is not now", up.CreatedAt)
			}
			got, err := cl.Files.GetMetadata(ctx, up.ID, anthropic.FileGetMetadataParams{})
			if err != nil || got.ID != up.ID || got.SizeBytes != 1000 || !got.CreatedAt.Equal(up.CreatedAt) {
				t.Fatalf("GetMetadata: %+v %v", got, err)
			}
			page, err := cl.Files.List(ctx, anthropic.FileListParams{})
			if err != nil || len(page.Data) == 0 || page.Data[0].ID != up.ID {
				t.Fatalf("List: %+v %v", page, err)
			}
			if _, err := cl.Files.Download(ctx, up.ID, anthropic.FileDownloadParams{}); sdkStatus(err) != 403 {
				t.Fatalf("Download of an uploaded file: %v; want 403", err)
			}
			del, err := cl.Files.Delete(ctx, up.ID, anthropic.FileDeleteParams{})
			if err != nil || del.ID != up.ID || del.Type != "file_deleted" {
				t.Fatalf("Delete: %+v %v", del, err)
			}
			if _, err := cl.Files.GetMetadata(ctx, up.ID, anthropic.FileGetMetadataParams{}); sdkStatus(err) != 404 {
				t.Fatalf("GetMetadata after delete: %v; want 404", err)
			}
			if _, err := cl.Files.Delete(ctx, up.ID, anthropic.FileDeleteParams{}); sdkStatus(err) != 404 {
				t.Fatalf("second Delete: %v; want 404", err)
			}
		})
	}
	if n := e.fileCount(); n != 0 {
		t.Fatalf("%d files left after every delete", n)
	}
}

func TestFilesAlphaSDKPaging(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	cl := e.alphaClient("/v1/router/alpha", keyA)
	var ids []string
	for i := range 7 {
		f, err := cl.Files.Upload(ctx, anthropic.FileUploadParams{
			File: anthropic.File(bytes.NewReader(testImage(gifHead, 100+i)), fmt.Sprintf("f%d.gif", i), "image/gif"),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	// manual pages of 3: 3, 3, 1, then no next page
	var got []string
	page, err := cl.Files.List(ctx, anthropic.FileListParams{Limit: anthropic.Int(3)})
	for pages := 0; pages < 10; pages++ {
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Data {
			got = append(got, f.ID)
		}
		if page.NextPage == "" {
			if pages != 2 {
				t.Fatalf("%d pages; want 3", pages+1)
			}
			break
		}
		if !strings.HasPrefix(page.NextPage, "af1_file_svc_") {
			t.Fatalf("next_page %q", page.NextPage)
		}
		page, err = page.GetNextPage()
	}
	if !slices.Equal(got, newestFirst) {
		t.Fatalf("pages = %v; want %v", got, newestFirst)
	}

	// the auto-pager
	got = got[:0]
	iter := cl.Files.ListAutoPaging(ctx, anthropic.FileListParams{Limit: anthropic.Int(2)})
	for iter.Next() && len(got) <= maxPaged {
		got = append(got, iter.Current().ID)
	}
	if iter.Err() != nil || !slices.Equal(got, newestFirst) {
		t.Fatalf("auto-pager = %v, %v; want %v", got, iter.Err(), newestFirst)
	}

	// ids, as the SDK encodes them (ids[]=...), with an unknown id and a duplicate
	page, err = cl.Files.List(ctx, anthropic.FileListParams{IDs: []string{ids[1], ids[4], ids[1], store.NewFileID(time.Now())}})
	if err != nil || len(page.Data) != 2 || page.Data[0].ID != ids[4] || page.Data[1].ID != ids[1] || page.NextPage != "" {
		t.Fatalf("List by ids: %+v %v", page, err)
	}
}

func TestFilesAlphaBetaSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	cl := e.alphaClient("/alpha", keyA)
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaFilesAPI2025_04_14}
	var ids []string
	for i, head := range []string{pngHead, jpegHead, gifHead, webpHead, pngHead} {
		f, err := cl.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
			File:  anthropic.File(bytes.NewReader(testImage(head, 64+i)), "", ""),
			Betas: betas,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/png"}[i]
		wantName := "unnamed" + []string{".png", ".jpg", ".gif", ".webp", ".png"}[i]
		if f.MimeType != want || f.Filename != wantName || f.Downloadable {
			t.Fatalf("upload %d: %+v", i, f)
		}
		// the default expiry: files.default_expires_in, 720h
		if d := f.ExpiresAt.Sub(f.CreatedAt); d != 720*time.Hour {
			t.Fatalf("default expiry %v", d)
		}
		ids = append(ids, f.ID)
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	// The current SDK pages with next_page even when it sends the files beta header.
	var got []string
	iter := cl.Beta.Files.ListAutoPaging(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(2), Betas: betas})
	for iter.Next() && len(got) <= maxPaged {
		got = append(got, iter.Current().ID)
	}
	if iter.Err() != nil || !slices.Equal(got, newestFirst) {
		t.Fatalf("beta auto-pager = %v, %v; want %v", got, iter.Err(), newestFirst)
	}
	m, err := cl.Beta.Files.GetMetadata(ctx, ids[2], anthropic.BetaFileGetMetadataParams{Betas: betas})
	if err != nil || m.ID != ids[2] || m.MimeType != "image/gif" {
		t.Fatalf("beta GetMetadata: %+v %v", m, err)
	}
	if _, err := cl.Beta.Files.Download(ctx, ids[2], anthropic.BetaFileDownloadParams{Betas: betas}); sdkStatus(err) != 403 {
		t.Fatalf("beta Download: %v; want 403", err)
	}
	d, err := cl.Beta.Files.Delete(ctx, ids[2], anthropic.BetaFileDeleteParams{Betas: betas})
	if err != nil || d.ID != ids[2] || d.Type != "file_deleted" {
		t.Fatalf("beta Delete: %+v %v", d, err)
	}
	if e.fileCount() != 4 {
		t.Fatalf("%d files; want 4", e.fileCount())
	}
}

// legacyList is the older alpha list shape.
type legacyList struct {
	Data     []alphaFile `json:"data"`
	FirstID  *string     `json:"first_id"`
	LastID   *string     `json:"last_id"`
	HasMore  *bool       `json:"has_more"`
	NextPage *string     `json:"next_page"`
}

func TestFilesAlphaLegacyList(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	for range 5 {
		ids = append(ids, e.mustUpload(keyA, testImage(pngHead, 50)).ID)
	}
	hdr := map[string]string{"Authorization": "Bearer " + keyA, "anthropic-beta": "other-2025-01-01, files-api-2025-04-14"}
	list := func(query string) legacyList {
		t.Helper()
		status, _, b := e.send("GET", "/v1/router/alpha/v1/files?beta=true&"+query, hdr, "", nil)
		var l legacyList
		if status != 200 || json.Unmarshal(b, &l) != nil || l.HasMore == nil {
			t.Fatalf("legacy list %q: %d %s", query, status, b)
		}
		return l
	}
	idsOf := func(l legacyList) []string {
		var out []string
		for _, f := range l.Data {
			out = append(out, f.ID)
		}
		return out
	}
	l := list("limit=2")
	if !slices.Equal(idsOf(l), []string{ids[4], ids[3]}) || !*l.HasMore || *l.FirstID != ids[4] || *l.LastID != ids[3] {
		t.Fatalf("first page %+v", l)
	}
	l = list("limit=2&after_id=" + *l.LastID)
	if !slices.Equal(idsOf(l), []string{ids[2], ids[1]}) || !*l.HasMore {
		t.Fatalf("after_id page %+v", l)
	}
	l = list("limit=2&after_id=" + *l.LastID)
	if !slices.Equal(idsOf(l), []string{ids[0]}) || *l.HasMore || l.NextPage != nil {
		t.Fatalf("last page %+v", l)
	}
	// before_id: the page just before the cursor, toward newer files
	l = list("limit=2&before_id=" + ids[0])
	if !slices.Equal(idsOf(l), []string{ids[2], ids[1]}) || !*l.HasMore || l.NextPage != nil {
		t.Fatalf("before_id page %+v", l)
	}
	l = list("limit=2&before_id=" + ids[2])
	if !slices.Equal(idsOf(l), []string{ids[4], ids[3]}) || *l.HasMore {
		t.Fatalf("first before_id page %+v", l)
	}
	// an empty list has null bounds
	status, _, b := e.send("GET", "/v1/router/alpha/v1/files?beta=true", map[string]string{
		"Authorization": "Bearer " + keyB, "anthropic-beta": "files-api-2025-04-14"}, "", nil)
	if status != 200 || string(b) != `{"data":[],"first_id":null,"last_id":null,"has_more":false,"next_page":null}` {
		t.Fatalf("empty legacy list: %d %s", status, b)
	}
	// without the header: the current shape
	status, _, b = e.send("GET", "/v1/router/alpha/v1/files", bearer(keyB), "", nil)
	if status != 200 || string(b) != `{"data":[],"next_page":null}` {
		t.Fatalf("empty list: %d %s", status, b)
	}
	// no uploaded file is scoped to a session; x-api-key authenticates as on messages
	status, _, b = e.send("GET", "/v1/router/alpha/v1/files?scope_id=sesn_1", map[string]string{"x-api-key": keyA}, "", nil)
	if status != 200 || string(b) != `{"data":[],"next_page":null}` {
		t.Fatalf("scope_id list: %d %s", status, b)
	}
}

func TestFilesBetaListSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		ids = append(ids, e.mustUpload(keyA, testImage(jpegHead, 10+i)).ID)
	}
	cl := e.betaClient(keyA)
	collect := func(params openai.FileListParams) []string {
		t.Helper()
		var got []string
		iter := cl.Files.ListAutoPaging(ctx, params)
		for iter.Next() && len(got) <= maxPaged {
			f := iter.Current()
			if f.Purpose != "user_data" || f.Status != "processed" || f.Bytes < 10 || f.CreatedAt == 0 || f.ExpiresAt <= f.CreatedAt {
				t.Fatalf("beta file object %+v", f)
			}
			got = append(got, f.ID)
		}
		if iter.Err() != nil {
			t.Fatal(iter.Err())
		}
		return got
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)
	if got := collect(openai.FileListParams{Limit: openai.Int(3)}); !slices.Equal(got, newestFirst) {
		t.Fatalf("desc pages = %v; want %v", got, newestFirst)
	}
	if got := collect(openai.FileListParams{}); !slices.Equal(got, newestFirst) {
		t.Fatalf("default = %v; want %v", got, newestFirst)
	}
	if got := collect(openai.FileListParams{Limit: openai.Int(2), Order: openai.FileListParamsOrderAsc}); !slices.Equal(got, ids) {
		t.Fatalf("asc pages = %v; want %v", got, ids)
	}
	if got := collect(openai.FileListParams{After: openai.String(ids[2]), Order: openai.FileListParamsOrderAsc}); !slices.Equal(got, ids[3:]) {
		t.Fatalf("asc after = %v; want %v", got, ids[3:])
	}
	if got := collect(openai.FileListParams{After: openai.String(ids[2])}); !slices.Equal(got, []string{ids[1], ids[0]}) {
		t.Fatalf("desc after = %v", got)
	}
	if got := collect(openai.FileListParams{Purpose: openai.String("user_data")}); len(got) != 7 {
		t.Fatalf("purpose user_data = %v", got)
	}
	if got := collect(openai.FileListParams{Purpose: openai.String("batch")}); len(got) != 0 {
		t.Fatalf("purpose batch = %v", got)
	}
	// has_more is always present, false on the last page
	page, err := cl.Files.List(ctx, openai.FileListParams{Limit: openai.Int(7)})
	if err != nil || len(page.Data) != 7 || page.HasMore || !page.JSON.HasMore.Valid() {
		t.Fatalf("last page: %+v %v", page, err)
	}
	if !strings.Contains(page.RawJSON(), `"has_more":false`) || !strings.Contains(page.RawJSON(), `"object":"list"`) {
		t.Fatalf("last page JSON %s", page.RawJSON())
	}
}

// TestFilesCrossTenant checks that a second key sees, deletes, downloads and references none
// of the first key's files, and that every refusal is "not found".
func TestFilesCrossTenant(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	fa := e.mustUpload(keyA, testImage(pngHead, 300))
	fb := e.mustUpload(keyB, testImage(pngHead, 301))
	b := e.alphaClient("/v1/router/alpha", keyB)

	page, err := b.Files.List(ctx, anthropic.FileListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != fb.ID {
		t.Fatalf("B's list: %+v %v", page, err)
	}
	page, err = b.Files.List(ctx, anthropic.FileListParams{IDs: []string{fa.ID, fb.ID}})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != fb.ID {
		t.Fatalf("B's list by ids: %+v %v", page, err)
	}
	bc := e.betaClient(keyB)
	bl, err := bc.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(bl.Data) != 1 || bl.Data[0].ID != fb.ID {
		t.Fatalf("B's beta list: %+v %v", bl, err)
	}
	// a page cursor naming A's file shows nothing of A's
	page, err = b.Files.List(ctx, anthropic.FileListParams{Page: anthropic.String("af1_" + fa.ID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range page.Data {
		if f.ID == fa.ID {
			t.Fatal("B sees A's file")
		}
	}
	if _, err := b.Files.GetMetadata(ctx, fa.ID, anthropic.FileGetMetadataParams{}); sdkStatus(err) != 404 {
		t.Fatalf("B reads A's metadata: %v", err)
	}
	if _, err := b.Files.Download(ctx, fa.ID, anthropic.FileDownloadParams{}); sdkStatus(err) != 404 {
		t.Fatalf("B downloads A's file: %v; want 404", err)
	}
	if _, err := b.Files.Delete(ctx, fa.ID, anthropic.FileDeleteParams{}); sdkStatus(err) != 404 {
		t.Fatalf("B deletes A's file: %v; want 404", err)
	}
	params := messageWithFile("chat-model", fa.ID)
	if _, err := b.Messages.New(ctx, params); sdkStatus(err) != 404 {
		t.Fatalf("B references A's file: %v; want 404", err)
	}
	if n := len(e.received()); n != 0 {
		t.Fatalf("%d requests reached a provider", n)
	}
	// A's file is intact
	ca := e.alphaClient("/v1/router/alpha", keyA)
	if _, err := ca.Files.GetMetadata(ctx, fa.ID, anthropic.FileGetMetadataParams{}); err != nil {
		t.Fatal(err)
	}
	if e.fileCount() != 2 {
		t.Fatalf("%d files; want 2", e.fileCount())
	}
}

func messageWithFile(model string, ids ...string) anthropic.MessageNewParams {
	blocks := []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("what is in these?")}
	for _, id := range ids {
		blocks = append(blocks, anthropic.NewImageBlock(anthropic.FileImageSourceParam{FileID: id}))
	}
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)},
	}
}

func TestFilesInlinedInMessages(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	png := testImage(pngHead, 5000)
	webp := testImage(webpHead, 700)
	f1 := e.mustUpload(keyA, png)
	f2 := e.mustUpload(keyA, webp)
	cl := e.alphaClient("/v1/router/alpha", keyA)
	msg, err := cl.Messages.New(ctx, messageWithFile("chat-model", f1.ID, f2.ID, f1.ID),
		aoption.WithJSONSet("session_id", "sess-1"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.ID == "" {
		t.Fatal("no message")
	}
	reqs := e.received()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	sent := reqs[0].Body
	if bytes.Contains(sent, []byte("file_svc_")) || bytes.Contains(sent, []byte("session_id")) {
		t.Fatalf("upstream body keeps gateway data: %.300s", sent)
	}
	var body struct {
		Messages []struct {
			Content []struct {
				Type   string `json:"type"`
				Source *struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(sent, &body); err != nil {
		t.Fatalf("upstream body is not JSON: %v", err)
	}
	blocks := body.Messages[0].Content
	want := []struct {
		mt   string
		data []byte
	}{{"image/png", png}, {"image/webp", webp}, {"image/png", png}}
	for i, w := range want {
		src := blocks[i+1].Source
		if blocks[i+1].Type != "image" || src == nil || src.Type != "base64" || src.MediaType != w.mt ||
			src.Data != base64.StdEncoding.EncodeToString(w.data) {
			t.Fatalf("block %d not inlined: %+v", i+1, blocks[i+1])
		}
	}
	// through the alias and group bases too, streaming
	e.resetSims()
	two := e.alphaClient("/alpha/two", keyA)
	stream := two.Messages.NewStreaming(ctx, messageWithFile("chat-model", f2.ID))
	for stream.Next() {
	}
	if stream.Err() != nil {
		t.Fatal(stream.Err())
	}
	if r := e.sim("d2").Requests(); len(r) != 1 || !bytes.Contains(r[0].Body, []byte(base64.StdEncoding.EncodeToString(webp))) {
		t.Fatalf("group two: %d requests", len(r))
	}
}

func TestFilesInlineRefusals(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	f := e.mustUpload(keyA, testImage(pngHead, 100))
	cl := e.alphaClient("/v1/router/alpha", keyA)
	unknown := store.NewFileID(time.Now())
	for _, ids := range [][]string{{unknown}, {f.ID, unknown}, {"file_svc_not-an-id"}} {
		_, err := cl.Messages.New(ctx, messageWithFile("chat-model", ids...))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 404 || !strings.Contains(ae.RawJSON(), `"not_found_error"`) {
			t.Fatalf("reference to %v: %v; want 404 not_found_error", ids, err)
		}
	}
	// a provider's own file id is not ours: it goes through untouched
	_, err := cl.Messages.New(ctx, messageWithFile("chat-model", "file_011CNha8iCJcU1wXNR6q4V8w"))
	if sdkStatus(err) != 404 || len(e.received()) != 1 || !bytes.Contains(e.received()[0].Body, []byte("file_011CNha8iCJcU1wXNR6q4V8w")) {
		t.Fatalf("provider file id: %v, %d upstream requests", err, len(e.received()))
	}
	e.resetSims()
	// a body that inlining takes over limits.max_body_bytes
	small := newEnv(t, func(y string) string { return y + "limits: {max_body_bytes: 4096}\n" })
	g := small.mustUpload(keyA, testImage(pngHead, 4000))
	sc := small.alphaClient("/v1/router/alpha", keyA)
	_, err = sc.Messages.New(ctx, messageWithFile("chat-model", g.ID))
	if sdkStatus(err) != 413 || len(small.received()) != 0 {
		t.Fatalf("oversized inlining: %v, %d upstream requests", err, len(small.received()))
	}
	// text that mentions file_svc_ is not a reference
	_, err = cl.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "chat-model", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("what is " + f.ID + "?"))},
	})
	if err != nil || len(e.received()) != 1 {
		t.Fatalf("text mentioning an id: %v", err)
	}
}

// TestFilesExpiry moves the gateway's clock past a file's expiry: the file is gone from
// every call at once, and the janitor's reclaim removes its bytes.
func TestFilesExpiry(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	short := e.mustUpload(keyA, testImage(pngHead, 2000), fieldPart("expires_in_seconds", "3600"))
	long := e.mustUpload(keyA, testImage(pngHead, 3000), fieldPart("expires_in_seconds", "7776000"))
	later := time.Now().Add(2 * time.Hour)
	e.gw.now = func() time.Time { return later }
	cl := e.alphaClient("/v1/router/alpha", keyA)
	if _, err := cl.Files.GetMetadata(ctx, short.ID, anthropic.FileGetMetadataParams{}); sdkStatus(err) != 404 {
		t.Fatalf("GetMetadata of an expired file: %v", err)
	}
	if _, err := cl.Files.Download(ctx, short.ID, anthropic.FileDownloadParams{}); sdkStatus(err) != 404 {
		t.Fatalf("Download of an expired file: %v", err)
	}
	if _, err := cl.Messages.New(ctx, messageWithFile("chat-model", short.ID)); sdkStatus(err) != 404 {
		t.Fatalf("reference to an expired file: %v", err)
	}
	page, err := cl.Files.List(ctx, anthropic.FileListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != long.ID {
		t.Fatalf("list: %+v %v", page, err)
	}
	page, err = cl.Files.List(ctx, anthropic.FileListParams{IDs: []string{short.ID, long.ID}})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("list by ids: %+v %v", page, err)
	}
	bc := e.betaClient(keyA)
	bl, err := bc.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(bl.Data) != 1 || bl.Data[0].ID != long.ID {
		t.Fatalf("beta list: %+v %v", bl, err)
	}
	if _, err := cl.Files.Delete(ctx, short.ID, anthropic.FileDeleteParams{}); sdkStatus(err) != 404 {
		t.Fatalf("Delete of an expired file: %v", err)
	}
	if n, size := e.store.FileStats(); n != 2 || size != 5000 {
		t.Fatalf("before reclaim: %d files, %d bytes", n, size)
	}
	e.gw.reclaim()
	if n, size := e.store.FileStats(); n != 1 || size != 3000 {
		t.Fatalf("after reclaim: %d files, %d bytes; want 1, 3000", n, size)
	}
}

// TestFilesDurable checks that acknowledged uploads survive a restart, and that a cut
// upload leaves nothing.
func TestFilesDurable(t *testing.T) {
	e := newEnv(t, nil)
	f := e.mustUpload(keyA, testImage(pngHead, 200000))
	// An upload cut off mid-file: the client goes away. Expect: 100-continue makes the
	// gateway answer once it has committed to reading the body, so the cut surely lands
	// inside the handler's read of the file.
	body, ct := multipartBody(filePart("cut.png", "image/png", testImage(pngHead, 300000)))
	conn := rawConn(t, e)
	fmt.Fprintf(conn, "POST /v1/router/alpha/v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", keyA, ct, len(body))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	conn.Write(body[:len(body)/2])
	conn.Close()
	e.restart()
	cl := e.alphaClient("/v1/router/alpha", keyA)
	page, err := cl.Files.List(context.Background(), anthropic.FileListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != f.ID || page.Data[0].SizeBytes != 200000 {
		t.Fatalf("after restart: %+v %v", page, err)
	}
	if n, size := e.store.FileStats(); n != 1 || size != 200000 {
		t.Fatalf("after restart: %d files, %d bytes", n, size)
	}
	if _, err := cl.Messages.New(context.Background(), messageWithFile("chat-model", f.ID)); err != nil {
		t.Fatalf("the file is not usable after a restart: %v", err)
	}
}

// rawConn opens a plain TCP connection to the gateway.
func rawConn(t *testing.T, e *testEnv) net.Conn {
	t.Helper()
	u, _ := url.Parse(e.base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
