package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// assertFilesError checks an error answer: its status and the family's native body, the
// alpha error type or the beta param, and that the message names what it should.
func assertFilesError(t *testing.T, fam family.Family, status int, body []byte, want int, typ, mention string) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, body)
	}
	var msg string
	switch fam {
	case family.Alpha:
		var v alphaErrorBody
		if json.Unmarshal(body, &v) != nil || v.Type != "error" || v.Error.Type != typ || v.RequestID == "" {
			t.Fatalf("not an alpha %s error: %s", typ, body)
		}
		msg = v.Error.Message
	case family.Beta:
		var v betaErrorBody
		if json.Unmarshal(body, &v) != nil || v.Error == nil || v.Error.Type != "invalid_request_error" ||
			v.Error.Param == nil || *v.Error.Param != typ || !bytes.Contains(body, []byte(`"code":`)) {
			t.Fatalf("not a beta error with param %s: %s", typ, body)
		}
		msg = v.Error.Message
	}
	if !strings.Contains(msg, mention) {
		t.Fatalf("message %q does not mention %q", msg, mention)
	}
}

// filesState is what the store shows of both keys: the rejection tests check that a
// refused call leaves it unchanged.
func (e *testEnv) filesState() string {
	e.t.Helper()
	n, size := e.store.FileStats()
	var ids []string
	for _, key := range []string{"team-a", "team-b"} {
		files, _, err := e.store.ListFiles(key, store.ListQuery{Limit: 100, Desc: true})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, f := range files {
			ids = append(ids, key+"/"+f.ID)
		}
	}
	return fmt.Sprintf("%d files, %d bytes: %v", n, size, ids)
}

func TestFilesUploadRejections(t *testing.T) {
	e := newEnv(t, nil)
	e.mustUpload(keyA, testImage(pngHead, 100))
	png := testImage(pngHead, 1000)
	f := func(name string, headers map[string]string, want int, typ, mention string, parts ...formPart) {
		t.Helper()
		before := e.filesState()
		status, b := e.uploadParts(keyA, headers, parts...)
		assertFilesError(t, family.Alpha, status, b, want, typ, mention)
		if after := e.filesState(); after != before {
			t.Fatalf("%s: the store changed from %s to %s", name, before, after)
		}
	}
	file := filePart("a.png", "image/png", png)
	f("idempotency key", map[string]string{"Idempotency-Key": "k1"}, 400, "invalid_request_error", "Idempotency-Key", file)
	f("workspace", map[string]string{"alpha-workspace-id": "wrkspc_1"}, 400, "invalid_request_error", "alpha-workspace-id", file)
	f("sdk workspace", map[string]string{"anthropic-workspace-id": "wrkspc_1"}, 400, "invalid_request_error", "anthropic-workspace-id", file)
	for _, v := range []string{"3599", "7776001", "0", "-3600", "abc", "", "3600.0", "+3600", "1e4", strings.Repeat("9", 80)} {
		f("expires "+v, nil, 400, "invalid_request_error", "expires_in_seconds", file, fieldPart("expires_in_seconds", v))
		f("expires first "+v, nil, 400, "invalid_request_error", "expires_in_seconds", fieldPart("expires_in_seconds", v), file)
	}
	f("expires twice", nil, 400, "invalid_request_error", "expires_in_seconds",
		fieldPart("expires_in_seconds", "3600"), file, fieldPart("expires_in_seconds", "3600"))
	f("no file field", nil, 400, "invalid_request_error", "file", fieldPart("expires_in_seconds", "3600"))
	f("empty form", nil, 400, "invalid_request_error", "file")
	f("two file fields", nil, 400, "invalid_request_error", "exactly one file", file, file)
	f("two file fields, direct", nil, 400, "invalid_request_error", "exactly one file",
		fieldPart("expires_in_seconds", "3600"), file, filePart("b.png", "", png))
	f("file under another name", nil, 400, "invalid_request_error", "named file",
		formPart{name: "image", filename: "a.png", data: png})
	f("unknown field", nil, 400, "invalid_request_error", "purpose", file, fieldPart("purpose", "user_data"))
	f("text file", nil, 400, "invalid_request_error", "PNG, JPEG, GIF and WebP",
		filePart("a.txt", "text/plain", []byte("hello, this is text")))
	f("pdf", nil, 400, "invalid_request_error", "unsupported file type",
		filePart("a.pdf", "application/pdf", []byte("%PDF-1.7\n...")))
	f("empty file", nil, 400, "invalid_request_error", "empty", filePart("a.png", "image/png", nil))
	f("declared jpeg, bytes png", nil, 400, "invalid_request_error", "image/jpeg", filePart("a.png", "image/jpeg", png))
	f("declared text, bytes png", nil, 400, "invalid_request_error", "text/plain", filePart("a.png", "text/plain", png))
	f("declared webp, bytes gif", nil, 400, "invalid_request_error", "image/webp",
		filePart("a.gif", "image/webp", testImage(gifHead, 100)))
	f("file over 8 MiB", nil, 413, "request_too_large", "8 MiB",
		filePart("big.png", "image/png", testImage(pngHead, maxUploadFileBytes+1)))
	f("file over 8 MiB, direct", nil, 413, "request_too_large", "8 MiB",
		fieldPart("expires_in_seconds", "3600"), filePart("big.png", "image/png", testImage(pngHead, maxUploadFileBytes+1)))
	f("part header over the form budget", nil, 413, "request_too_large", "part header",
		formPart{name: "file", filename: strings.Repeat("a", 70<<10) + ".png", data: png})

	// the same refusals do not depend on the family's SDK sending them
	cl := e.alphaClient("/v1/router/alpha", keyA)
	_, err := cl.Files.Upload(context.Background(), anthropic.FileUploadParams{
		File: anthropic.File(bytes.NewReader(png), "a.png", "image/png"), WorkspaceID: anthropic.String("wrkspc_1"),
	})
	if sdkStatus(err) != 400 {
		t.Fatalf("SDK upload with a workspace: %v", err)
	}
	_, err = cl.Files.Upload(context.Background(), anthropic.FileUploadParams{
		File: anthropic.File(bytes.NewReader(png), "a.png", "image/png"), ExpiresInSeconds: anthropic.Int(100),
	})
	if sdkStatus(err) != 400 {
		t.Fatalf("SDK upload expiring too soon: %v", err)
	}
	_, err = cl.Files.Upload(context.Background(), anthropic.FileUploadParams{
		File: anthropic.File(bytes.NewReader(png), "a.png", "image/png"),
	}, aoption.WithHeader("Idempotency-Key", "abc"))
	if sdkStatus(err) != 400 {
		t.Fatalf("SDK upload with an Idempotency-Key: %v", err)
	}
	if e.fileCount() != 1 {
		t.Fatalf("%d files stored", e.fileCount())
	}
}

// TestFilesUploadAccepts checks the edges that are accepted.
func TestFilesUploadAccepts(t *testing.T) {
	e := newEnv(t, nil)
	f := func(parts ...formPart) alphaFile {
		t.Helper()
		status, b := e.uploadParts(keyA, map[string]string{"alpha-workspace-id": ""}, parts...)
		var af alphaFile
		if status != 200 || json.Unmarshal(b, &af) != nil || af.Downloadable == nil || *af.Downloadable || af.ExpiresAt == nil {
			t.Fatalf("%d %s", status, b)
		}
		return af
	}
	big := testImage(pngHead, maxUploadFileBytes)
	if af := f(filePart("big.png", "image/png", big)); af.SizeBytes != maxUploadFileBytes {
		t.Fatalf("8 MiB file: %+v", af)
	}
	if af := f(fieldPart("expires_in_seconds", "7776000"), filePart("big.png", "", big)); af.SizeBytes != maxUploadFileBytes {
		t.Fatalf("8 MiB file, expiry first: %+v", af)
	}
	for _, v := range []string{"3600", "7776000", " 86400 "} {
		f(filePart("a.png", "", testImage(pngHead, 10)), fieldPart("expires_in_seconds", v))
	}
	if af := f(filePart(`C:\pics\cat.jpg`, "image/jpg", testImage(jpegHead, 10))); af.Filename != "cat.jpg" || af.MimeType != "image/jpeg" {
		t.Fatalf("windows path, image/jpg: %+v", af)
	}
	if af := f(filePart("x.bin", "application/octet-stream", testImage(webpHead, 20))); af.MimeType != "image/webp" || af.Filename != "x.bin" {
		t.Fatalf("octet-stream webp: %+v", af)
	}
	if af := f(formPart{name: "file", data: testImage(gifHead, 20)}); af.Filename != "unnamed.gif" || af.MimeType != "image/gif" {
		t.Fatalf("file field without filename: %+v", af)
	}
	if af := f(filePart("a.png", "IMAGE/PNG; charset=binary", testImage(pngHead, 20))); af.MimeType != "image/png" {
		t.Fatalf("declared type with parameters: %+v", af)
	}
}

// bigBody streams n bytes without holding them.
type bigBody struct{ n int64 }

func (b *bigBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	clear(p)
	b.n -= int64(len(p))
	return len(p), nil
}

// TestFilesUploadBodyLimit sends bodies over 8 MiB + 64 KiB, declared and chunked.
func TestFilesUploadBodyLimit(t *testing.T) {
	e := newEnv(t, nil)
	before := e.filesState()
	head, ct := multipartBody(filePart("big.png", "image/png", []byte(pngHead)))
	// head ends with the closing boundary; split it so that filler goes inside the file
	cut := bytes.LastIndex(head, []byte("\r\n--"))
	send := func(filler int64, chunked bool) (int, []byte) {
		t.Helper()
		var r io.Reader = io.MultiReader(bytes.NewReader(head[:cut]), &bigBody{filler}, bytes.NewReader(head[cut:]))
		req, _ := http.NewRequest("POST", e.base+"/v1/router/alpha/v1/files", r)
		if !chunked {
			req.ContentLength = int64(len(head)) + filler
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := filesHTTP.Do(req)
		if err != nil {
			t.Fatalf("filler %d, chunked %v: %v", filler, chunked, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, b := send(maxUploadBodyBytes, false)
	assertFilesError(t, family.Alpha, status, b, 413, "request_too_large", "upload body")
	status, b = send(maxUploadBodyBytes, true)
	assertFilesError(t, family.Alpha, status, b, 413, "request_too_large", "8 MiB")
	status, b = send(20<<20, true)
	assertFilesError(t, family.Alpha, status, b, 413, "request_too_large", "8 MiB")
	// a file of 8 MiB and part headers within the form budget that together pass the
	// body limit: refused while reading
	padded := formPart{name: "expires_in_seconds", data: []byte("3600"), pad: 60 << 10}
	body, ct2 := multipartBody(filePart("big.png", "image/png", testImage(pngHead, maxUploadFileBytes)), padded, padded)
	req, _ := http.NewRequest("POST", e.base+"/v1/router/alpha/v1/files", io.MultiReader(bytes.NewReader(body)))
	req.Header.Set("Content-Type", ct2)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := filesHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assertFilesError(t, family.Alpha, resp.StatusCode, b, 413, "request_too_large", "upload body")
	// far over the limit: refused before reading, and the client still gets the answer
	for range 3 {
		status, b = send(100<<20, false)
		assertFilesError(t, family.Alpha, status, b, 413, "request_too_large", "upload body")
	}
	if after := e.filesState(); after != before {
		t.Fatalf("the store changed from %s to %s", before, after)
	}
	// the connection is still good for the next call
	if status, _ := e.uploadParts(keyA, nil, filePart("a.png", "", testImage(pngHead, 10))); status != 200 {
		t.Fatalf("upload after refusals: %d", status)
	}
}

func TestFilesUploadOtherRefusals(t *testing.T) {
	e := newEnv(t, nil)
	before := e.filesState()
	body, ct := multipartBody(filePart("a.png", "", testImage(pngHead, 10)))
	status, _, b := e.send("POST", "/v1/router/alpha/v1/files", nil, ct, bytes.NewReader(body))
	assertFilesError(t, family.Alpha, status, b, 401, "authentication_error", "API key")
	status, _, b = e.send("POST", "/v1/router/alpha/v1/files", bearer(keyA), "application/json", strings.NewReader(`{"file":"x"}`))
	assertFilesError(t, family.Alpha, status, b, 400, "invalid_request_error", "multipart/form-data")
	status, _, b = e.send("POST", "/alpha/nogroup/v1/files", bearer(keyA), ct, bytes.NewReader(body))
	assertFilesError(t, family.Alpha, status, b, 404, "not_found_error", "nogroup")
	trunc := body[:len(body)-10]
	status, _, b = e.send("POST", "/v1/router/alpha/v1/files", bearer(keyA), ct, bytes.NewReader(trunc))
	assertFilesError(t, family.Alpha, status, b, 400, "invalid_request_error", "multipart")
	if after := e.filesState(); after != before {
		t.Fatalf("the store changed from %s to %s", before, after)
	}
}

func TestFilesListRejections(t *testing.T) {
	e := newEnv(t, nil)
	id := e.mustUpload(keyA, testImage(pngHead, 100)).ID
	before := e.filesState()
	alpha := func(query string, mention string) {
		t.Helper()
		status, _, b := e.send("GET", "/v1/router/alpha/v1/files?"+query, bearer(keyA), "", nil)
		assertFilesError(t, family.Alpha, status, b, 400, "invalid_request_error", mention)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = "ids[]=" + store.NewFileID(e.gw.now())
	}
	alpha("ids[]="+id+"&page=af1_"+id, "page")
	alpha("ids[]="+id+"&limit=5", "limit")
	alpha("ids="+id+"&limit=5", "limit")
	alpha("ids[]="+id+"&after_id="+id, "after_id")
	alpha(strings.Join(many, "&"), "at most 100")
	alpha("ids[]=nope", "ids")
	alpha("ids[]=", "ids")
	alpha("ids=file_svc_01J0000000000000000000000", "ids")
	alpha("ids[]="+strings.ToLower(id), "ids")
	for _, p := range []string{"", "abc", "af1_", "af1_nope", "af2_" + id, "af1_" + strings.ToLower(id), id, "af1_" + id + "x"} {
		alpha("page="+p, "page")
	}
	for _, l := range []string{"0", "101", "-1", "abc", "", "1.5", "+5", "99999999999999999999"} {
		alpha("limit="+l, "limit")
	}
	alpha("after_id=abc", "after_id")
	alpha("before_id="+id+"x", "before_id")
	alpha("after_id="+id+"&page=af1_"+id, "page")

	beta := func(query, param string) {
		t.Helper()
		status, _, b := e.send("GET", "/v1/router/beta/v1/files?"+query, bearer(keyA), "", nil)
		assertFilesError(t, family.Beta, status, b, 400, param, param)
	}
	for _, l := range []string{"0", "101", "x", ""} {
		beta("limit="+l, "limit")
	}
	for _, a := range []string{"", "abc", "af1_" + id, "file-abc", strings.ToLower(id)} {
		beta("after="+a, "after")
	}
	for _, o := range []string{"", "up", "ASC", "descending"} {
		beta("order="+o, "order")
	}
	beta("purpose=pictures", "purpose")

	// 100 distinct ids with duplicates are accepted
	ok := make([]string, 0, 150)
	for i := range 100 {
		ok = append(ok, "ids[]="+store.NewFileID(e.gw.now()))
		if i%2 == 0 {
			ok = append(ok, ok[len(ok)-1])
		}
	}
	status, _, b := e.send("GET", "/v1/router/alpha/v1/files?"+strings.Join(ok, "&")+"&ids="+id, bearer(keyA), "", nil)
	if status != 400 {
		t.Fatalf("101 distinct ids over both encodings: %d %s", status, b)
	}
	status, _, b = e.send("GET", "/v1/router/alpha/v1/files?"+strings.Join(ok, "&"), bearer(keyA), "", nil)
	if status != 200 || string(b) != `{"data":[],"next_page":null}` {
		t.Fatalf("100 distinct ids: %d %s", status, b)
	}
	status, _, b = e.send("GET", "/v1/router/alpha/v1/files?ids="+id+"&ids[]="+id, bearer(keyA), "", nil)
	if status != 200 || !bytes.Contains(b, []byte(id)) {
		t.Fatalf("both ids encodings: %d %s", status, b)
	}
	if after := e.filesState(); after != before {
		t.Fatalf("the store changed from %s to %s", before, after)
	}
}

func TestFilesPathRejections(t *testing.T) {
	e := newEnv(t, nil)
	id := e.mustUpload(keyA, testImage(pngHead, 100)).ID
	before := e.filesState()
	f := func(method, path, key string, want int, typ, mention string, headers ...string) {
		t.Helper()
		h := bearer(key)
		for i := 0; i+1 < len(headers); i += 2 {
			h[headers[i]] = headers[i+1]
		}
		status, _, b := e.send(method, path, h, "", nil)
		assertFilesError(t, family.Alpha, status, b, want, typ, mention)
	}
	for _, base := range []string{"/v1/router/alpha", "/alpha", "/alpha/one"} {
		files := base + "/v1/files/"
		// content: refused for the owner, unknown for anyone else
		f("GET", files+id+"/content", keyA, 403, "permission_error", "not downloadable")
		f("GET", files+id+"/content", keyB, 404, "not_found_error", id)
		f("GET", files+store.NewFileID(e.gw.now())+"/content", keyA, 404, "not_found_error", "not found")
		for _, bad := range []string{"nope", strings.ToLower(id), id + "0", "file_svc_" + strings.Repeat("Z", 26)} {
			f("GET", files+bad, keyA, 400, "invalid_request_error", "file_id")
			f("DELETE", files+bad, keyA, 400, "invalid_request_error", "file_id")
			f("GET", files+bad+"/content", keyA, 400, "invalid_request_error", "file_id")
		}
		f("GET", files+id, keyB, 404, "not_found_error", id)
		f("DELETE", files+id, keyB, 404, "not_found_error", id)
		f("GET", files+id, keyA, 400, "invalid_request_error", "workspace", "anthropic-workspace-id", "wrkspc_1")
		f("GET", base+"/v1/files", keyA, 400, "invalid_request_error", "workspace", "alpha-workspace-id", "w")
	}
	f("GET", "/alpha/nogroup/v1/files/"+id, keyA, 404, "not_found_error", "nogroup")
	f("GET", "/v1/router/alpha/v1/files/"+id, "wrong-key", 401, "authentication_error", "invalid")
	if after := e.filesState(); after != before {
		t.Fatalf("the store changed from %s to %s", before, after)
	}
}

// A chunked upload whose chunk size line never ends is refused once the line
// passes the framing bound, and the store is unchanged.
func TestFilesUploadChunkFramingBounded(t *testing.T) {
	e := newEnv(t, nil)
	before := e.filesState()
	body, ct := multipartBody(filePart("a.png", "image/png", testImage(pngHead, 10)))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		fmt.Fprintf(conn, "POST /v1/router/alpha/v1/files HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n5;", keyA, ct, 40, body[:40])
		fill := strings.Repeat("a", 64<<10)
		for range 16 { // 1 MiB of extension, then the client waits
			if _, err := io.WriteString(conn, fill); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	assertFilesError(t, family.Alpha, resp.StatusCode, b, 413, "request_too_large", "size lines and extensions")
	if after := e.filesState(); after != before {
		t.Fatalf("the store changed from %s to %s", before, after)
	}
}
