//go:build !race

package proxy

import (
	"bytes"
	"testing"
)

// Reading and counting token usage allocates nothing per request, and the
// requests measured are counted.
func TestTokenUsageAllocatesNothing(t *testing.T) {
	h := newHotBench(t)
	req, resp := h.warmRequest(t, hotBody)
	const runs = 500
	if allocs := testing.AllocsPerRun(runs, func() { h.do(t, req, resp) }); allocs != 0 {
		t.Fatalf("%v allocations per request with token usage", allocs)
	}
	var out bytes.Buffer
	h.gw.WritePrometheus(&out)
	// 100 + 501 answers of 9 prompt tokens (AllocsPerRun runs once more to warm up)
	if want := []byte(`gateway_tokens_total{key="bench",model="m",kind="input"} 5409`); !bytes.Contains(out.Bytes(), want) {
		t.Fatalf("want %s in:\n%s", want, grepLines(out.Bytes(), "gateway_tokens_total"))
	}
}

func grepLines(b []byte, s string) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}
