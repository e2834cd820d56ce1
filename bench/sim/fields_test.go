package sim

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// jsonFields returns the top-level JSON field names of the SDK params types.
func jsonFields(types ...any) map[string]struct{} {
	out := make(map[string]struct{})
	for _, v := range types {
		t := reflect.TypeOf(v)
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out[name] = struct{}{}
			}
		}
	}
	return out
}

// TestKnownFieldsMatchSDKs proves that each endpoint's known top-level fields are
// exactly what the official SDK can send (stream is set by the SDKs' streaming
// methods through option.WithJSONSet, so it has no tag).
func TestKnownFieldsMatchSDKs(t *testing.T) {
	f := func(name string, known, sdk map[string]struct{}, extra ...string) {
		t.Helper()
		for _, e := range extra {
			sdk[e] = struct{}{}
		}
		var missing, surplus []string
		for k := range sdk {
			if _, ok := known[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range known {
			if _, ok := sdk[k]; !ok {
				surplus = append(surplus, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(surplus)
		if len(missing)+len(surplus) > 0 {
			t.Fatalf("%s: the simulator lacks %v and has extra %v", name, missing, surplus)
		}
	}
	f("messages", alphaMessageFields, jsonFields(anthropic.MessageNewParams{}, anthropic.BetaMessageNewParams{}), "stream")
	f("chat", betaChatFields, jsonFields(openai.ChatCompletionNewParams{}), "stream")
	f("responses", responsesFields, jsonFields(responses.ResponseNewParams{}), "stream")
	f("images", imagesFields, jsonFields(openai.ImageGenerateParams{}), "stream")
	f("input_tokens", inputTokensFields, jsonFields(responses.InputTokenCountParams{}))
	f("compact", compactFields, jsonFields(responses.ResponseCompactParams{}))
}
