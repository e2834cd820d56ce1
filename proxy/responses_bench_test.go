package proxy

import (
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
)

// BenchmarkResponsesCreate compares a create whose ownership record is
// written, at each store durability (machine: fsync'd by Pebble,
// group-committed across concurrent calls; process: written to the kernel),
// with the same create sent with "store": false, which is not recorded.
func BenchmarkResponsesCreate(b *testing.B) {
	for _, d := range []string{"process", "machine"} {
		b.Run(d, func(b *testing.B) {
			e := newEnv(b, func(yaml string) string { return yaml + "store: {durability: " + d + "}\n" })
			benchResponsesCreate(b, e)
		})
	}
}

func benchResponsesCreate(b *testing.B, e *testEnv) {
	f := func(name, body string, parallelism int) {
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(parallelism)
			client := &fasthttp.HostClient{Addr: e.ln.Addr().String(), MaxConns: 256}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				createRequest(req, body)
				for pb.Next() {
					if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
						b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
					}
				}
			})
		})
	}
	for _, p := range []int{1, 16} { // 2 and 32 calls in flight on 2 cores
		f(fmt.Sprintf("recorded/inflight-%d", 2*p), `{"model":"chat-model","input":"hello"}`, p)
		f(fmt.Sprintf("unrecorded/inflight-%d", 2*p), `{"model":"chat-model","input":"hello","store":false}`, p)
	}
}

// createRequest makes req a create of key A with body.
func createRequest(req *fasthttp.Request, body string) {
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gw" + responsesBase)
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
}

// BenchmarkResponsesRetrieve is a retrieve (GET by id) of a recorded response:
// the ownership lookup in the store and the call to the deployment that holds it.
func BenchmarkResponsesRetrieve(b *testing.B) {
	e := newEnv(b, nil)
	client := &fasthttp.HostClient{Addr: e.ln.Addr().String(), MaxConns: 256}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	createRequest(req, `{"model":"chat-model","input":"hello"}`)
	if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
		b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
	}
	id, err := parse.StringValue(nil, parse.Member(resp.Body(), "id"))
	if err != nil || len(id) == 0 {
		b.Fatalf("no id in %s", resp.Body())
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://gw" + responsesBase + "/" + string(id))
		req.Header.Set("Authorization", "Bearer "+keyA)
		for pb.Next() {
			if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
			}
		}
	})
}
