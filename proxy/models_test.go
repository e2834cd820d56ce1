package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3/option"
)

// The alpha model list through anthropic-sdk-go on every alpha base: only
// models with an alpha deployment (in the group, on a grouped base), in the
// Anthropic shape, with retrieve-one and the alpha auth and error shape.
func TestModelsAlphaSDK(t *testing.T) {
	e := newEnv(t, func(y string) string {
		return strings.Replace(y, "groups:\n", "groups:\n  - {name: betaonly, upstreams: [d1-beta]}\n", 1)
	})
	ctx := context.Background()
	f := func(base string, want ...string) {
		t.Helper()
		cl := e.alphaClient(base, keyA)
		var ids []string
		for iter := cl.Models.ListAutoPaging(ctx, anthropic.ModelListParams{}); iter.Next(); {
			m := iter.Current()
			if m.Type != "model" || m.DisplayName == "" || m.CreatedAt.Before(time.Unix(1, 0)) {
				t.Errorf("%s: entry %+v", base, m)
			}
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s: list %v; want %v", base, ids, want)
		}
		for _, id := range want {
			if m, err := cl.Models.Get(ctx, id, anthropic.ModelGetParams{}); err != nil || m.ID != id {
				t.Errorf("%s: get %s: %v", base, id, err)
			}
		}
		if _, err := cl.Models.Get(ctx, "image-model", anthropic.ModelGetParams{}); sdkStatus(err) != 404 {
			t.Errorf("%s: get of a model without alpha deployment: %v", base, err)
		}
	}
	f("/v1/router/alpha", "chat-model")
	f("/alpha", "chat-model")
	f("/alpha/one", "chat-model")
	f("/alpha/betaonly")

	status, _, body := e.do("GET", "/alpha/nope/v1/models", bearer(keyA), "")
	assertAlphaError(t, status, body, 404, "not_found_error")
	status, _, body = e.do("GET", "/v1/router/alpha/v1/models", nil, "")
	assertAlphaError(t, status, body, 401, "authentication_error")
	status, _, body = e.do("GET", "/alpha/v1/models/chat-model", bearer("wrong"), "")
	assertAlphaError(t, status, body, 401, "authentication_error")
}

// The beta model list on the OpenAI base URL is the spec's /v1/models, with
// retrieve-one on both.
func TestModelsBetaBase(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, want := e.do("GET", "/v1/models", bearer(keyA), "")
	status, _, got := e.do("GET", "/v1/router/beta/v1/models", bearer(keyA), "")
	if status != 200 || string(got) != string(want) {
		t.Fatalf("beta base list: %d %s\nwant %s", status, got, want)
	}
	for _, base := range []string{"/v1", "/v1/router/beta/v1"} {
		cl := e.openai(keyA, option.WithBaseURL(e.base+base))
		m, err := cl.Models.Get(ctx, "text-gamma")
		if err != nil || m.ID != "text-gamma" || m.Object != "model" {
			t.Fatalf("%s: get: %+v %v", base, m, err)
		}
		if _, err := cl.Models.Get(ctx, "no-such-model"); sdkStatus(err) != 404 {
			t.Fatalf("%s: get of an unknown model: %v", base, err)
		}
	}
	status, _, body := e.do("GET", "/v1/router/beta/v1/models/chat-model", nil, "")
	assertBetaError(t, status, body, 401)
}
