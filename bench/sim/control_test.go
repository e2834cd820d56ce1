package sim

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestParseFault(t *testing.T) {
	f := func(v string, want Fault, wantErr bool) {
		t.Helper()
		var got Fault
		err := ParseFault([]byte(v), &got)
		if (err != nil) != wantErr || got != want && !wantErr {
			t.Fatalf("ParseFault(%q) = %+v, %v; want %+v, error %v", v, got, err, want, wantErr)
		}
	}
	f("status=503", Fault{Status: 503}, false)
	f("reset", Fault{Reset: true}, false)
	f("cut=3", Fault{CutAfter: 3}, false)
	f("error=3", Fault{ErrorAfter: 3}, false)
	f("first-byte=2s", Fault{FirstByteDelay: 2 * time.Second}, false)
	f(" first-byte=10ms , cut=2 ", Fault{FirstByteDelay: 10 * time.Millisecond, CutAfter: 2}, false)
	f("status=200", Fault{}, true)
	f("cut=0", Fault{}, true)
	f("cut=x", Fault{}, true)
	f("reset=1", Fault{}, true)
	f("first-byte=-1s", Fault{}, true)
	f("boom", Fault{}, true)
}

// newCtx builds a request context for calling Handler without a network.
func newCtx(method, uri string, header map[string]string, body []byte) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.SetBody(body)
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, nil, nil)
	return ctx
}

var fuzzEndpoints = []struct {
	uri    string
	header map[string]string
	errKey string // the key every error body of the family has
}{
	{"/v1/messages", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}, "type"},
	{"/v1/chat/completions", map[string]string{"Authorization": "Bearer k"}, "error"},
	{"/v1/responses", map[string]string{"Authorization": "Bearer k"}, "error"},
	{"/v1/responses/input_tokens", map[string]string{"Authorization": "Bearer k"}, "error"},
	{"/v1/responses/compact", map[string]string{"Authorization": "Bearer k"}, "error"},
	{"/v1/images/generations", map[string]string{"Authorization": "Bearer k"}, "error"},
	{"/v1beta/models/g:generateContent", map[string]string{"x-goog-api-key": "k"}, "error"},
}

// FuzzHandlerBodies feeds any body to every POST endpoint: the simulator must not
// panic, and must answer valid JSON (or a complete SSE stream).
func FuzzHandlerBodies(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call_output","call_id":"c","output":"o"}]}`))
	f.Add([]byte(`{"model":"m","prompt":"p","size":"10x20","n":2,"response_format":"url"}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseModalities":["IMAGE"],"imageConfig":{"aspectRatio":"3:2","imageSize":"4K"}}}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}],"max_tokens":1}`))
	f.Add([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
	s := New(Options{NoRecord: true, StreamEvents: 2})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, ep := range fuzzEndpoints {
			ctx := newCtx("POST", ep.uri, ep.header, body)
			s.Handler(ctx)
			out := ctx.Response.Body() // reads a streamed body to its end
			status := ctx.Response.StatusCode()
			if bytes.HasPrefix(ctx.Response.Header.ContentType(), []byte("text/event-stream")) {
				continue
			}
			var v map[string]json.RawMessage
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s: status %d, body is not a JSON object: %v\n%s", ep.uri, status, err, out)
			}
			if status != 200 && v[ep.errKey] == nil {
				t.Fatalf("%s: status %d without the family's error shape: %s", ep.uri, status, out)
			}
		}
	})
}

// FuzzParseFault: any x-sim-fault value either fails or yields a fault in bounds.
func FuzzParseFault(f *testing.F) {
	for _, seed := range []string{"status=503", "reset", "cut=3,error=2", "first-byte=2s", " , ,", "status=5O3"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		var fault Fault
		if err := ParseFault(v, &fault); err != nil {
			return
		}
		if fault.Status != 0 && (fault.Status < 400 || fault.Status > 599) ||
			fault.CutAfter < 0 || fault.CutAfter > maxEvents || fault.ErrorAfter < 0 || fault.ErrorAfter > maxEvents ||
			fault.FirstByteDelay < 0 || fault.FirstByteDelay > maxDelay {
			t.Fatalf("ParseFault(%q) = %+v: out of bounds", v, fault)
		}
	})
}
