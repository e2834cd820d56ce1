package proxy

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"
)

// usageSum is what the SDKs read as the providers' usage, summed.
type usageSum struct{ input, output, cached, reasoning int64 }

func (u *usageSum) add(in, out, cached, reasoning int64) {
	u.input += in
	u.output += out
	u.cached += cached
	u.reasoning += reasoning
}

// checkTokens compares the token counters of key team-a and model with want,
// against the scrape before. A streamed call is counted when the gateway
// closes its stream, which may come after the client read the last byte: the
// counters are awaited until they reach want.
func (e *testEnv) checkTokens(t *testing.T, before map[string]float64, model string, want usageSum) {
	t.Helper()
	kinds := map[string]int64{"input": want.input, "output": want.output, "cached": want.cached, "reasoning": want.reasoning}
	var after map[string]float64
	moved := func(kind string) float64 {
		series := `gateway_tokens_total{key="team-a",model="` + model + `",kind="` + kind + `"}`
		return after[series] - before[series]
	}
	eventually(t, "token counters reach the reported usage", func() bool {
		after = e.scrape()
		for kind, n := range kinds {
			if moved(kind) < float64(n) {
				return false
			}
		}
		return true
	})
	for kind, n := range kinds {
		if got := moved(kind); got != float64(n) {
			t.Errorf("%s tokens of %s moved by %v, the simulator reported %d", kind, model, got, n)
		}
	}
	if want.input == 0 || want.output == 0 || want.cached == 0 {
		t.Errorf("the simulator reported too little to compare: %+v", want)
	}
}

// The token counters match the usage the simulator reported, exactly, for
// plain and streamed calls of every family (gamma: plain, the only form the
// gateway serves), read through the official SDKs.
func TestTokenUsageMatchesProviders(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	t.Run("beta", func(t *testing.T) {
		before, want := e.scrape(), usageSum{}
		oc := e.openai(keyA)
		c, err := oc.Chat.Completions.New(ctx, chatParams("chat-model"))
		if err != nil {
			t.Fatal(err)
		}
		u := c.Usage
		want.add(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens)
		p := chatParams("chat-model")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := oc.Chat.Completions.NewStreaming(ctx, p)
		for s.Next() {
			if u := s.Current().Usage; u.PromptTokens > 0 {
				want.add(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens)
			}
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		r, err := oc.Responses.New(ctx, newResponseParams("chat-model", "hi"))
		if err != nil {
			t.Fatal(err)
		}
		want.add(r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.InputTokensDetails.CachedTokens, r.Usage.OutputTokensDetails.ReasoningTokens)
		// A retrieve repeats the usage of the create: counted once, at the create.
		for range 2 {
			got, err := oc.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			if err != nil || got.Usage.OutputTokens == 0 {
				t.Fatalf("retrieve: %v, usage %+v", err, got.Usage)
			}
		}
		rs := oc.Responses.NewStreaming(ctx, newResponseParams("chat-model", "hi again"))
		for rs.Next() {
			if ev := rs.Current(); ev.Type == "response.completed" {
				u := ev.Response.Usage
				want.add(u.InputTokens, u.OutputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens)
			}
		}
		if rs.Err() != nil {
			t.Fatal(rs.Err())
		}
		if want.reasoning == 0 {
			t.Error("no reasoning tokens reported")
		}
		e.checkTokens(t, before, "chat-model", want)
	})
	t.Run("alpha", func(t *testing.T) {
		before, want := e.scrape(), usageSum{}
		ac := e.anthropic(keyA)
		m, err := ac.Messages.New(ctx, messageParams("chat-model"))
		if err != nil {
			t.Fatal(err)
		}
		want.add(m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, 0)
		s := ac.Messages.NewStreaming(ctx, messageParams("chat-model"))
		var streamed anthropic.Message
		for s.Next() {
			if err := streamed.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		u := streamed.Usage
		want.add(u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, 0)
		e.checkTokens(t, before, "chat-model", want)
	})
	// The gateway serves gamma's generateContent for image models, unstreamed.
	t.Run("gamma", func(t *testing.T) {
		before, want := e.scrape(), usageSum{}
		gc, _ := e.gammaClient("/v1/router/gamma", "v1beta", keyA, nil)
		add := func(u *genai.GenerateContentResponseUsageMetadata) {
			want.add(int64(u.PromptTokenCount), int64(u.CandidatesTokenCount), int64(u.CachedContentTokenCount), int64(u.ThoughtsTokenCount))
		}
		r, err := gc.Models.GenerateContent(ctx, "image-model", genai.Text("Say hello"), nil)
		if err != nil {
			t.Fatal(err)
		}
		add(r.UsageMetadata)
		e.checkTokens(t, before, "image-model", want)
	})
}
