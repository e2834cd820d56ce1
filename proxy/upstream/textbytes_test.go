package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// TestRelayCountsStreamedText relays the simulator's golden stream of each
// family and checks that TextBytes is the length of the text its deltas carry,
// as a JSON decoder reads them (the transcripts' text needs no escapes).
func TestRelayCountsStreamedText(t *testing.T) {
	f := func(file string, fam family.Family, responses bool, text func(ev map[string]any) string) {
		t.Helper()
		sse, err := os.ReadFile("../../bench/sim/testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for _, line := range bytes.Split(sse, []byte("\n")) {
			data, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data: "))
			var ev map[string]any
			if ok && json.Unmarshal(data, &ev) == nil {
				want += int64(len(text(ev)))
			}
		}
		var dials int
		half := len(sse)/2 + bytes.Index(sse[len(sse)/2:], []byte("\n\n")) + 2 // two chunks, split between events
		client := pipeUpstream(t, &dials, wiretest.SSEHead+chunk(string(sse[:half]))+chunk(string(sse[half:]))+"0\r\n\r\n")
		var r Relay
		r.CountUsage()
		if err := send(t, client, &r, true); err != nil {
			t.Fatal(err)
		}
		var out fasthttp.Response
		r.dep = &Deployment{}
		r.dep.inflight.Add(1)
		r.Stream(&out, fam, responses, nil)
		defer r.Close()
		if _, err := r.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
		if got := r.TextBytes(); want == 0 || got != want {
			t.Fatalf("%s: TextBytes %d, want %d", file, got, want)
		}
	}
	str := func(v any) string { s, _ := v.(string); return s }
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	first := func(v any) map[string]any {
		a, _ := v.([]any)
		if len(a) == 0 {
			return nil
		}
		return obj(a[0])
	}
	f("alpha_messages.sse", family.Alpha, false, func(ev map[string]any) string { return str(obj(ev["delta"])["text"]) })
	f("beta_chat.sse", family.Beta, false, func(ev map[string]any) string { return str(obj(first(ev["choices"])["delta"])["content"]) })
	f("beta_responses.sse", family.Beta, true, func(ev map[string]any) string {
		if str(ev["type"]) != "response.output_text.delta" {
			return ""
		}
		return str(ev["delta"])
	})
	f("gamma_generate.sse", family.Gamma, false, func(ev map[string]any) string {
		var s string
		for _, p := range obj(first(ev["candidates"])["content"])["parts"].([]any) {
			s += str(obj(p)["text"])
		}
		return s
	})
}
