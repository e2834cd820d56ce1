package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/gateway/store"
)

func newResponseParams(model, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
	}
}

func TestResponsesSDKLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	client := e.openai(keyA)

	first, err := client.Responses.New(ctx, newResponseParams("chat-model", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "resp_") || first.OutputText() == "" {
		t.Fatalf("first response: %+v", first)
	}
	rec, err := e.store.GetResponse(first.ID)
	if err != nil || rec.Owner != "team-a" || rec.Model != "chat-model" {
		t.Fatalf("ownership record: %+v %v", rec, err)
	}

	// A streamed continuation without a model inherits the route model.
	params := responses.ResponseNewParams{
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("and again")},
	}
	stream := client.Responses.NewStreaming(ctx, params)
	var second responses.Response
	events := 0
	for stream.Next() {
		ev := stream.Current()
		events++
		if ev.Type == "response.completed" {
			second = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events < 5 || second.ID == "" || second.PreviousResponseID != first.ID {
		t.Fatalf("streamed continuation: %d events, %+v", events, second)
	}
	rec2, err := e.store.GetResponse(second.ID)
	if err != nil || rec2.Model != "chat-model" || rec2.Deployment != rec.Deployment || rec2.Owner != "team-a" {
		t.Fatalf("continuation record: %+v (first %+v) %v", rec2, rec, err)
	}

	got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != second.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
	items, err := client.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{Limit: openai.Int(10)})
	if err != nil || len(items.Data) == 0 {
		t.Fatalf("input items: %+v %v", items, err)
	}
	count, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.InputTokenCountParamsInputUnion{OfString: openai.String("how many?")},
	})
	if err != nil || count.InputTokens <= 0 {
		t.Fatalf("input tokens: %+v %v", count, err)
	}
	compacted, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model:              "chat-model",
		PreviousResponseID: openai.String(second.ID),
	})
	if err != nil || compacted.ID == "" {
		t.Fatalf("compact: %+v %v", compacted, err)
	}
	countByModel, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{
		Model: openai.String("chat-model"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("count me")},
	})
	if err != nil || countByModel.InputTokens <= 0 {
		t.Fatalf("input tokens by model: %+v %v", countByModel, err)
	}

	if err := client.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.GetResponse(first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after delete: %v", err)
	}
	_, err = client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("get after delete: %v", err)
	}
	// Every owned call went to the deployment that holds the response.
	holder := strings.TrimSuffix(rec.Deployment, "-beta")
	other := map[string]string{"d1": "d2", "d2": "d1"}[holder]
	for _, r := range e.sim(other).Requests() {
		routedByModel := r.Path == "/v1/responses" || r.Path == "/v1/responses/input_tokens"
		if !routedByModel || strings.Contains(string(r.Body), "previous_response_id") {
			t.Fatalf("a call about %s's responses reached %s: %s %s", holder, other, r.Path, r.Body)
		}
	}
}

// A continuation with only previous_response_id lands on the original
// deployment, and the provider receives exactly the client's bytes.
func TestResponsesContinuationBytesAndPinning(t *testing.T) {
	e := newEnv(t, nil)
	for i := 0; i < 10; i++ {
		status, h, body := e.do("POST", responsesBase, withSession(keyA, "conv-"+string(rune('a'+i))),
			`{"model":"chat-model","input":"start"}`)
		if status != 200 {
			t.Fatalf("create: %d %s", status, body)
		}
		holder := string(h.Peek("x-sim-deployment"))
		var created struct{ ID string }
		json.Unmarshal(body, &created)
		e.resetSims()
		cont := "{\n  \"previous_response_id\": \"" + created.ID + "\",\n  \"input\": [{\"role\":\"user\",\"content\":\"more \\u00e9\"}]\n}"
		status, h, body = e.do("POST", responsesBase, bearer(keyA), cont)
		if status != 200 || string(h.Peek("x-sim-deployment")) != holder {
			t.Fatalf("continuation: %d on %q (holder %q): %s", status, h.Peek("x-sim-deployment"), holder, body)
		}
		got := e.sim(holder).Requests()
		if len(got) != 1 || string(got[0].Body) != cont {
			t.Fatalf("provider received %q, client sent %q", got, cont)
		}
	}
}

// A second key can do nothing with the first key's response, and the
// providers see none of its attempts.
func TestResponsesCrossTenant(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	a := e.openai(keyA)
	first, err := a.Responses.New(ctx, newResponseParams("chat-model", "mine"))
	if err != nil {
		t.Fatal(err)
	}
	e.resetSims()
	b := e.openai(keyB)
	want404 := func(name string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Fatalf("%s: want 404, got %v", name, err)
		}
	}
	_, err = b.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	want404("get", err)
	want404("delete", b.Responses.Delete(ctx, first.ID))
	_, err = b.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{})
	want404("input items", err)
	_, err = b.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("steal")}})
	want404("continue", err)
	_, err = b.Responses.New(ctx, responses.ResponseNewParams{Model: "chat-model", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("steal")}})
	want404("continue with model", err)
	_, err = b.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{PreviousResponseID: openai.String(first.ID)})
	want404("input tokens", err)
	_, err = b.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "chat-model", PreviousResponseID: openai.String(first.ID)})
	want404("compact", err)
	if n := len(e.received()); n != 0 {
		t.Fatalf("providers saw %d calls from the second key", n)
	}
	// Foreign and unknown ids are answered alike.
	_, _, foreign := e.do("GET", responsesBase+"/"+first.ID, bearer(keyB), "")
	_, _, unknown := e.do("GET", responsesBase+"/resp_doesnotexist", bearer(keyB), "")
	if strings.ReplaceAll(string(foreign), first.ID, "X") != strings.ReplaceAll(string(unknown), "resp_doesnotexist", "X") {
		t.Fatalf("foreign and unknown answers differ:\n%s\n%s", foreign, unknown)
	}
	// The owner still has it.
	if _, err := a.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}
}

func TestResponsesRejections(t *testing.T) {
	e := newEnv(t, nil)
	f := func(name, method, path string, h map[string]string, body string, status int) {
		t.Helper()
		s, _, b := e.do(method, path, h, body)
		assertBetaError(t, s, b, status)
	}
	idem := bearer(keyA)
	idem["idempotency-key"] = "k-1"
	f("idempotency on create", "POST", responsesBase, idem, `{"model":"chat-model","input":"x"}`, 400)
	idem2 := bearer(keyA)
	idem2["IDEMPOTENCY-KEY"] = "k-2"
	f("idempotency upper case", "POST", responsesBase, idem2, `{"model":"chat-model","input":"x"}`, 400)
	f("idempotency without auth", "POST", responsesBase, map[string]string{"Idempotency-Key": "k"}, `{"model":"chat-model"}`, 400)
	f("idempotency on input_tokens", "POST", responsesBase+"/input_tokens", idem, `{"model":"chat-model","input":"x"}`, 400)
	f("idempotency on compact", "POST", responsesBase+"/compact", idem, `{"model":"chat-model","input":"x"}`, 400)
	f("no model", "POST", responsesBase, bearer(keyA), `{"input":"x"}`, 400)
	f("null previous, no model", "POST", responsesBase, bearer(keyA), `{"input":"x","previous_response_id":null}`, 400)
	f("unknown previous", "POST", responsesBase, bearer(keyA), `{"input":"x","previous_response_id":"resp_nope"}`, 404)
	f("unknown model", "POST", responsesBase, bearer(keyA), `{"model":"nope","input":"x"}`, 404)
	f("no key", "POST", responsesBase, nil, `{"model":"chat-model","input":"x"}`, 401)
	f("input_tokens without model", "POST", responsesBase+"/input_tokens", bearer(keyA), `{"input":"x"}`, 400)
	f("get unknown", "GET", responsesBase+"/resp_nope", bearer(keyA), "", 404)
	f("delete unknown", "DELETE", responsesBase+"/resp_nope", bearer(keyA), "", 404)
	f("input items unknown", "GET", responsesBase+"/resp_nope/input_items", bearer(keyA), "", 404)
	ws := bearer(keyA)
	ws["Upgrade"] = "websocket"
	ws["Connection"] = "Upgrade"
	f("websocket", "GET", responsesBase, ws, "", 400)
	if n := len(e.received()); n != 0 {
		t.Fatalf("rejected calls reached providers: %d", n)
	}
}

// The query string of owned reads reaches the provider exactly as encoded.
func TestResponsesQueryForwardedAsEncoded(t *testing.T) {
	e := newEnv(t, nil)
	status, h, body := e.do("POST", responsesBase, bearer(keyA), `{"model":"chat-model","input":"x"}`)
	if status != 200 {
		t.Fatal(status, string(body))
	}
	var created struct{ ID string }
	json.Unmarshal(body, &created)
	holder := string(h.Peek("x-sim-deployment"))
	e.resetSims()
	q := "include%5B%5D=message.input_image.image_url&limit=2&order=asc&include[]=file_search_call.results"
	status, _, body = e.do("GET", responsesBase+"/"+created.ID+"/input_items?"+q, bearer(keyA), "")
	if status != 200 {
		t.Fatal(status, string(body))
	}
	got := e.sim(holder).Requests()
	if len(got) != 1 || got[0].RawQuery != q || got[0].Path != "/v1/responses/"+created.ID+"/input_items" {
		t.Fatalf("provider got %+v, want query %q", got, q)
	}
}

// store: false responses are not recorded: the provider keeps nothing to
// continue from.
func TestResponsesStoreFalseNotRecorded(t *testing.T) {
	e := newEnv(t, nil)
	status, _, body := e.do("POST", responsesBase, bearer(keyA), `{"model":"chat-model","input":"x","store":false}`)
	if status != 200 {
		t.Fatal(status, string(body))
	}
	var created struct{ ID string }
	json.Unmarshal(body, &created)
	if _, err := e.store.GetResponse(created.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("store:false response recorded: %v", err)
	}
}

// Records survive a restart of the gateway on the same store.
func TestResponsesSurviveRestart(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	first, err := e.openai(keyA).Responses.New(ctx, newResponseParams("chat-model", "remember"))
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	client := e.openai(keyA)
	if _, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("continue")}}, option.WithMaxRetries(0))
	if err != nil || next.PreviousResponseID != first.ID {
		t.Fatalf("continue after restart: %+v %v", next, err)
	}
}

// Elsewhere the client's query string is the gateway's to read and stays
// with it: the ?beta=true the alpha SDK adds, or a gamma ?key= holding the
// caller's gateway key, never reaches a provider.
func TestQueryNotForwardedElsewhere(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ path, body string }{
		{"/v1/router/alpha/v1/messages?beta=true", `{"model":"chat-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`},
		{chatPath + "?key=" + keyA, `{"model":"chat-model","messages":[{"role":"user","content":"hi"}]}`},
		{responsesBase + "?stream=false", `{"model":"chat-model","input":"x"}`},
	} {
		e.resetSims()
		if status, _, body := e.do("POST", c.path, bearer(keyA), c.body); status != 200 {
			t.Fatalf("%s: %d %s", c.path, status, body)
		}
		if r := e.received(); len(r) != 1 || r[0].RawQuery != "" {
			t.Fatalf("%s: the provider got %+v", c.path, r)
		}
	}
}
