package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
)

// bigUpstream serves answers of the size asked for in the X-Size request
// header (the gateway forwards it): with a Content-Length, or chunked in
// small chunks when X-Chunked is set. Every family's path answers alike.
func bigUpstream(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("a"), 4<<10)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		size, _ := strconv.Atoi(string(ctx.Request.Header.Peek("X-Size")))
		ctx.SetContentType("application/json")
		if len(ctx.Request.Header.Peek("X-Chunked")) == 0 {
			ctx.SetBody(answerOfSize(size))
			return
		}
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			w.WriteString(`{"x":"`)
			for left := size - 8; left > 0; left -= len(chunk) {
				w.Write(chunk[:min(left, len(chunk))])
				w.Flush() // one small chunk per write
			}
			w.WriteString(`"}`)
		})
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// answerOfSize is a JSON object of exactly size bytes (size >= 8).
func answerOfSize(size int) []byte {
	return []byte(`{"x":"` + strings.Repeat("a", size-8) + `"}`)
}

// bigEnv is the fixture with the big upstream behind model big-model of
// alpha and beta, and limits.max_response_bytes set to limit.
func bigEnv(t testing.TB, limit int) *testEnv {
	big := bigUpstream(t)
	return newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: big-alpha, family: alpha, base_url: \"http://"+big+"\", api_key: k}\n"+
			"  - {name: big-beta, family: beta, base_url: \"http://"+big+"/v1\", api_key: k}\n"+
			"models:\n  - {id: big-model, upstreams: [big-alpha, big-beta]}\n", 1)
		return y + "limits: {max_response_bytes: " + strconv.Itoa(limit) + "}\n"
	})
}

// TestUpstreamAnswerBound checks that a non-streamed answer longer than
// limits.max_response_bytes is answered 502 in the family's shape, with its
// length announced or not, and that one at the bound is relayed whole.
func TestUpstreamAnswerBound(t *testing.T) {
	const limit = 1 << 20
	e := bigEnv(t, limit)
	f := func(fam family.Family, size int, chunked bool, want int) {
		t.Helper()
		path := "/v1/router/beta/v1/chat/completions"
		if fam == family.Alpha {
			path = "/v1/router/alpha/v1/messages"
		}
		h := bearer(keyA)
		h["X-Size"] = strconv.Itoa(size)
		if chunked {
			h["X-Chunked"] = "1"
		}
		status, _, body := e.do("POST", path, h, `{"model":"big-model","max_tokens":5}`)
		if want == 200 {
			if status != 200 || !bytes.Equal(body, answerOfSize(size)) {
				t.Fatalf("%s size %d chunked %v: %d, %d bytes", fam, size, chunked, status, len(body))
			}
			return
		}
		assertFamilyError(t, fam, status, body, 502, "larger than")
	}
	for _, fam := range []family.Family{family.Alpha, family.Beta} {
		for _, chunked := range []bool{false, true} {
			f(fam, limit, chunked, 200)
			f(fam, limit+1, chunked, 502)
			f(fam, 8*limit, chunked, 502)
			f(fam, 1000, chunked, 200)
		}
	}
}

// assertFamilyError checks that an answer is the gateway's error want in the
// native shape of fam, with a message that mentions mention.
func assertFamilyError(t testing.TB, fam family.Family, status int, body []byte, want int, mention string) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, body)
	}
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err := json.Unmarshal(body, &v)
	ok := err == nil && strings.Contains(v.Error.Message, mention)
	switch fam {
	case family.Alpha:
		ok = ok && v.Type == "error" && v.Error.Type != ""
	case family.Beta:
		ok = ok && v.Error.Type != "" && bytes.Contains(body, []byte(`"param":`))
	case family.Gamma:
		ok = ok && v.Error.Code == want && v.Error.Status != ""
	}
	if !ok {
		t.Fatalf("not a %s error mentioning %q: %s", fam, mention, body)
	}
}

// TestUpstreamAnswerLoadedByRelay covers a bound above what fasthttp reads
// at linear cost: the relay reads answers itself, streams a long one of
// known length, and still refuses one over the bound.
func TestUpstreamAnswerLoadedByRelay(t *testing.T) {
	e := bigEnv(t, 100<<20)
	for _, size := range []int{1000, 2 << 20} {
		for _, chunked := range []bool{false, true} {
			h := bearer(keyA)
			h["X-Size"] = strconv.Itoa(size)
			if chunked {
				h["X-Chunked"] = "1"
			}
			status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", h, `{"model":"big-model"}`)
			if status != 200 || !bytes.Equal(body, answerOfSize(size)) {
				t.Fatalf("size %d chunked %v: %d, %d bytes", size, chunked, status, len(body))
			}
		}
	}
}

// BenchmarkChunkedAnswer relays a chunked answer made of 4 KiB chunks, read
// whole by fasthttp (bound 64 MiB) or by the relay (bound 256 MiB): the
// cost per byte should not grow with the size.
func BenchmarkChunkedAnswer(b *testing.B) {
	for _, limit := range []int{64 << 20, 256 << 20} {
		e := bigEnv(b, limit)
		for _, size := range []int{16 << 20, 64 << 20, 160 << 20} {
			if size > limit {
				continue
			}
			b.Run(strconv.Itoa(limit>>20)+"MiB-bound/"+strconv.Itoa(size>>20)+"MiB", func(b *testing.B) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.Header.SetMethod("POST")
				req.SetRequestURI(e.base + "/v1/router/beta/v1/chat/completions")
				req.Header.Set("Authorization", "Bearer "+keyA)
				req.Header.Set("X-Size", strconv.Itoa(size))
				req.Header.Set("X-Chunked", "1")
				req.SetBodyString(`{"model":"big-model"}`)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := fasthttp.Do(req, resp); err != nil || resp.StatusCode() != 200 || len(resp.Body()) != size {
						b.Fatalf("%v %d %d", err, resp.StatusCode(), len(resp.Body()))
					}
				}
			})
		}
	}
}
