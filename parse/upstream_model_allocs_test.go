//go:build !race

package parse

import "testing"

func TestAppendForUpstreamAllocs(t *testing.T) {
	body := []byte(chatBody)
	var fl Fields
	if err := Peek(body, &fl); err != nil || !fl.HasSessionID() || fl.Model == nil {
		t.Fatalf("%v %v %q", err, fl.HasSessionID(), fl.Model)
	}
	model := []byte(`"a-much-longer-provider-model-name"`)
	dst := make([]byte, 0, len(body)+len(model))
	if n := testing.AllocsPerRun(100, func() { dst = AppendForUpstream(dst[:0], body, &fl, model) }); n != 0 {
		t.Fatalf("AppendForUpstream allocates %v times per run", n)
	}
}
