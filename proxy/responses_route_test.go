package proxy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/store"
)

// responsesIDRoute takes exactly the requests that the router's routes of
// one response take, with the same id: serve hands them to responsesOwned
// before the router, and anything it does not take goes to the router.
func TestResponsesIDRouteMatchesTheRouter(t *testing.T) {
	type match struct {
		ep endpoint
		id string
	}
	var got *match
	record := func(ep endpoint) fasthttp.RequestHandler {
		return func(ctx *fasthttp.RequestCtx) { got = &match{ep, string(idParam(ctx))} }
	}
	r := router.New()
	r.RedirectTrailingSlash, r.RedirectFixedPath = false, false
	r.GET(responsesBase+"/{id}", record(epResponsesGet))
	r.DELETE(responsesBase+"/{id}", record(epResponsesDelete))
	r.GET(responsesBase+"/{id}"+inputItems, record(epResponsesInputItems))
	// The other Responses routes, whose paths the {id} ones must not take.
	r.POST(responsesBase, func(*fasthttp.RequestCtx) {})
	r.GET(responsesBase, func(*fasthttp.RequestCtx) {})
	r.POST(responsesBase+"/input_tokens", func(*fasthttp.RequestCtx) {})
	r.POST(responsesBase+"/compact", func(*fasthttp.RequestCtx) {})

	paths := []string{
		responsesBase, responsesBase + "/", responsesBase + "//", responsesBase + "//x",
		responsesBase + "/resp_1", responsesBase + "/resp_1/", responsesBase + "/resp_1" + inputItems,
		responsesBase + "/resp_1" + inputItems + "/", responsesBase + "/resp_1/input_itemsx",
		responsesBase + "/resp_1/other", responsesBase + "/a/b/c", responsesBase + "//input_items",
		responsesBase + "/input_tokens", responsesBase + "/compact", responsesBase + "/resp%2F1",
		responsesBase + "/resp%2F1" + inputItems, responsesBase + "/resp_1?stream=true",
		responsesBase + "/resp_1" + inputItems + "?limit=2", responsesBase + "x/resp_1",
		"/v1/router/beta/v1/Responses/resp_1", "/v1/responses/resp_1", "/resp_1",
	}
	methods := []string{"GET", "DELETE", "POST", "PUT", "HEAD", "OPTIONS", "PATCH", "get"}
	for _, p := range paths {
		for _, m := range methods {
			t.Run(fmt.Sprintf("%s %s", m, p), func(t *testing.T) {
				var ctx fasthttp.RequestCtx
				ctx.Request.Header.SetMethod(m)
				ctx.Request.SetRequestURI(p)
				got = nil
				r.Handler(&ctx)
				id, ep, ok := responsesIDRoute(&ctx)
				switch {
				case got == nil && ok:
					t.Fatalf("taken (%v %q), the router's routes take it not", ep, id)
				case got != nil && !ok:
					t.Fatalf("not taken, the router's %v takes it with id %q", got.ep, got.id)
				case got != nil && (got.ep != ep || got.id != string(id)):
					t.Fatalf("taken as %v %q, the router's as %v %q", ep, id, got.ep, got.id)
				}
			})
		}
	}
}

// panickyStore panics on every lookup of a response.
type panickyStore struct{ store.Store }

func (panickyStore) GetResponse(string) (store.Response, error) { panic("lookup") }

// A panic in a handler that serve calls before the router is answered as the
// router's PanicHandler answers one: a 500 in the family's shape, logged, and
// the server goes on.
func TestResponsesIDRouteRecoversPanic(t *testing.T) {
	st, err := store.OpenPebble(t.TempDir(), store.PebbleOptions{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := newHotBenchWith(t, Options{Store: panickyStore{st}})
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://gateway" + responsesBase + "/resp_1")
	req.Header.Set("Authorization", "Bearer bench-key")
	for range 2 {
		if err := h.client.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 500 || !bytes.Contains(resp.Body(), []byte(`"error"`)) {
			t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
		}
	}
}
