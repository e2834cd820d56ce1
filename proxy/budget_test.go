package proxy

import (
	"strings"
	"testing"

	"github.com/modelgate/gateway/proxy/family"
)

// TestBodyBudget checks that request bodies held by calls in flight are
// bounded by limits.max_buffered_body_bytes: while one call holds 600 KiB
// of a 1 MiB budget, another of 600 KiB, declared or chunked, is answered
// 503 busy with Retry-After in its family's shape; once the first is done
// its share is back.
func TestBodyBudget(t *testing.T) {
	h, addr := newPinUpstream(t, 1)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: hold-beta, family: beta, base_url: \"http://"+addr+
			"/v1\", api_key: k}\nmodels:\n  - {id: hold-model, upstreams: [hold-beta]}\n", 1)
		return y + "limits: {max_buffered_body_bytes: 1048576}\n"
	})
	t.Cleanup(h.releaseAll)
	body := `{"model":"hold-model","pad":"` + strings.Repeat("p", 600<<10) + `"}`
	first := make(chan int)
	go func() {
		status, _, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), body)
		first <- status
	}()
	<-h.arrived // the first call holds its body while its upstream call is under way
	status, hdr, got := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), body)
	assertFamilyError(t, family.Beta, status, got, 503, "busy")
	if string(hdr.Peek("Retry-After")) != "1" {
		t.Fatalf("Retry-After %q", hdr.Peek("Retry-After"))
	}
	status, _, got = e.send("POST", "/v1/router/alpha/v1/messages", pinHeaders("hold"), "application/json",
		strings.NewReader(strings.Replace(body, "hold-model", "chat-model", 1))) // chunked
	assertFamilyError(t, family.Alpha, status, got, 503, "busy")
	h.releaseAll()
	if status := <-first; status != 200 {
		t.Fatalf("the first call: %d", status)
	}
	if status, _, got := e.do("POST", "/v1/router/beta/v1/chat/completions", pinHeaders("hold"), body); status != 200 {
		t.Fatalf("after the first call: %d %s", status, got)
	}
	if held := e.gw.bodiesHeld.Load(); held != 0 {
		t.Fatalf("%d bytes still reserved", held)
	}
}
