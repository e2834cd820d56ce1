package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/store"
)

// The fuzz targets drive the handlers in process with what a client controls: the
// multipart body of an upload and the query of a listing.

const fuzzBoundary = "fuzzboundary"

// serveInProcess runs one request through the gateway's handler without a network. The
// query string is set as given, whatever bytes it holds.
func serveInProcess(e *testEnv, method, path, query, contentType string, body []byte) *fasthttp.Response {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.URI().SetQueryString(query)
	ctx.Request.Header.Set("Authorization", "Bearer "+keyA)
	if contentType != "" {
		ctx.Request.Header.SetContentType(contentType)
	}
	ctx.Request.SetBody(body)
	e.gw.Handler()(&ctx)
	var resp fasthttp.Response
	ctx.Response.CopyTo(&resp)
	return &resp
}

// FuzzFilesUpload checks that no multipart body makes an upload fail on the gateway's
// side: the answer is 200 with a stored image, or a 4xx alpha error that stores nothing.
func FuzzFilesUpload(f *testing.F) {
	e := newBenchEnv(f)
	seed := func(parts ...formPart) {
		var buf bytes.Buffer
		body, ct := multipartBody(parts...)
		// re-frame with the fixed boundary of the target
		old := ct[strings.Index(ct, "boundary=")+len("boundary="):]
		buf.Write(bytes.ReplaceAll(body, []byte(old), []byte(fuzzBoundary)))
		f.Add(buf.Bytes())
	}
	seed(filePart("a.png", "image/png", testImage(pngHead, 40)))
	seed(fieldPart("expires_in_seconds", "3600"), filePart("a.gif", "", testImage(gifHead, 40)))
	seed(filePart("a.webp", "image/webp", testImage(webpHead, 40)), fieldPart("expires_in_seconds", "7776000"))
	seed(filePart("a.png", "image/jpeg", testImage(pngHead, 40)))
	seed(filePart("a.png", "", testImage(pngHead, 40)), filePart("b.png", "", testImage(pngHead, 40)))
	f.Fuzz(func(t *testing.T, body []byte) {
		n0, _ := e.store.FileStats()
		resp := serveInProcess(e, "POST", "/v1/router/alpha/v1/files", "", "multipart/form-data; boundary="+fuzzBoundary, body)
		n1, _ := e.store.FileStats()
		status := resp.StatusCode()
		switch {
		case status == 200:
			var af alphaFile
			if json.Unmarshal(resp.Body(), &af) != nil || !store.ValidFileID(af.ID) ||
				imageExt(af.MimeType) == "" || n1 != n0+1 {
				t.Fatalf("accepted %q: %s (files %d -> %d)", body, resp.Body(), n0, n1)
			}
			if err := e.store.DeleteFile("team-a", af.ID); err != nil {
				t.Fatal(err)
			}
		case status >= 400 && status < 500:
			var v struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if json.Unmarshal(resp.Body(), &v) != nil || v.Type != "error" || v.Error.Message == "" || n1 != n0 {
				t.Fatalf("refused %q: %d %s (files %d -> %d)", body, status, resp.Body(), n0, n1)
			}
		default:
			t.Fatalf("upload of %q: %d %s", body, status, resp.Body())
		}
	})
}

// FuzzFilesListQuery checks that any query of either listing is answered 200 with a list,
// or 400 in the family's shape; never a failure of the gateway.
func FuzzFilesListQuery(f *testing.F) {
	e := newBenchEnv(f)
	for range 3 {
		if _, err := e.store.PutFile(store.File{Owner: "team-a", Filename: "a.png", MimeType: "image/png",
			Purpose: filePurpose, Created: e.gw.now()}, bytes.NewReader(testImage(pngHead, 40)), 100); err != nil {
			f.Fatal(err)
		}
	}
	id := store.NewFileID(e.gw.now())
	for _, q := range []string{"limit=2", "page=af1_" + id, "ids[]=" + id + "&ids=" + id, "after_id=" + id + "&limit=1",
		"before_id=" + id, "after=" + id + "&order=asc&purpose=user_data", "limit=0", "ids%5B%5D=" + id, "\"\x03"} {
		f.Add(q, false)
		f.Add(q, true)
	}
	f.Fuzz(func(t *testing.T, query string, beta bool) {
		path := "/v1/router/alpha/v1/files"
		if beta {
			path = "/v1/router/beta/v1/files"
		}
		resp := serveInProcess(e, "GET", path, query, "", nil)
		var v struct {
			Data  []json.RawMessage `json:"data"`
			Error json.RawMessage   `json:"error"`
		}
		status := resp.StatusCode()
		if json.Unmarshal(resp.Body(), &v) != nil || (status == 200) != (v.Data != nil) ||
			(status != 200 && (status != 400 || v.Error == nil)) || len(v.Data) > store.MaxListLimit {
			t.Fatalf("%s%q: %d %s", path, query, status, resp.Body())
		}
	})
}
