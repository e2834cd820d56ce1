package proxy

import (
	"strings"
	"testing"

	"github.com/modelgate/gateway/parse"
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

// TestBodyBudgetCountsInlinedFiles checks that the copies inlining makes
// count in the budget, not only the body read: with a 1 MiB budget, a 1 KiB
// message that inlines a 600 KiB file (its base64 and its bytes: about
// 1.4 MiB) is answered 413, as the budget could never hold it; two that
// inline 150 KiB each are held at once and pass; while they are held, one
// that inlines 400 KiB, which fits alone, is answered 503 busy; once they are
// done it passes, and nothing stays reserved.
func TestBodyBudgetCountsInlinedFiles(t *testing.T) {
	h, addr := newPinUpstream(t, 1)
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: hold-alpha, family: alpha, base_url: \"http://"+addr+
			"\", api_key: k}\nmodels:\n  - {id: hold-model, upstreams: [hold-alpha]}\n", 1)
		return y + "limits: {max_buffered_body_bytes: 1048576}\n"
	})
	t.Cleanup(h.releaseAll)
	small := e.mustUpload(keyA, testImage(pngHead, 150<<10))
	medium := e.mustUpload(keyA, testImage(pngHead, 400<<10))
	large := e.mustUpload(keyA, testImage(pngHead, 600<<10))
	msg := func(id string) string {
		return `{"model":"hold-model","max_tokens":10,"messages":[{"role":"user","content":[` +
			`{"type":"image","source":{"type":"file","file_id":"` + id + `"}}]}]}`
	}
	const path = "/v1/router/alpha/v1/messages"

	status, _, got := e.do("POST", path, pinHeaders("hold"), msg(large.ID))
	assertFamilyError(t, family.Alpha, status, got, 413, "budget")

	done := make(chan int, 2)
	for range 2 {
		go func() {
			status, _, _ := e.do("POST", path, pinHeaders("hold"), msg(small.ID))
			done <- status
		}()
	}
	<-h.arrived
	<-h.arrived // both are held upstream, their inlined bodies with them
	if held := e.gw.bodiesHeld.Load(); held < 2*(150<<10)*4/3 {
		t.Fatalf("%d bytes reserved for two bodies that inline 150 KiB each", held)
	}
	status, _, got = e.do("POST", path, pinHeaders("hold"), msg(medium.ID))
	assertFamilyError(t, family.Alpha, status, got, 503, "busy")
	h.releaseAll()
	for range 2 {
		if status := <-done; status != 200 {
			t.Fatalf("a call inlining 150 KiB: %d", status)
		}
	}
	if status, _, got := e.do("POST", path, pinHeaders("stream"), msg(medium.ID)); status != 200 {
		t.Fatalf("the call inlining 400 KiB, alone: %d %s", status, got)
	}
	if held := e.gw.bodiesHeld.Load(); held != 0 {
		t.Fatalf("%d bytes still reserved", held)
	}
}

// TestCallLetsGoOfLargeCopies checks that once a stream begins, a call lets
// go of its large request body copies, their budget shares and the peeked
// fields that point into the body; and that a released call keeps no buffer
// past its bound, a 36 MiB event's scanner included.
func TestCallLetsGoOfLargeCopies(t *testing.T) {
	e := newEnv(t, nil)
	c := new(call)
	c.g, c.st = e.gw, e.gw.state.Load()
	body := []byte(`{"model":"chat-model","session_id":"s1","pad":"` + strings.Repeat("p", 2<<20) + `"}`)
	if !c.reserveUpTo(len(body)) {
		t.Fatal("body refused")
	}
	c.body = append(c.body, body...)
	if err := parse.Peek(c.body, &c.fields); err != nil || !c.reserveShare(&c.shares.spliced, len(c.body)) {
		t.Fatalf("peek: %v", err)
	}
	c.bodyWithoutSessionID()
	if held := e.gw.bodiesHeld.Load(); held != int64(2*len(body)) {
		t.Fatalf("%d bytes reserved for a body and its copy of %d bytes", held, len(body))
	}
	c.dropLargeBodies()
	if c.body != nil || c.spliced != nil || c.fields.Model != nil || c.fields.SessionID != nil {
		t.Fatalf("kept: body %d, spliced %d, model %q", cap(c.body), cap(c.spliced), c.fields.Model)
	}
	if held := e.gw.bodiesHeld.Load(); held != 0 {
		t.Fatalf("%d bytes still reserved", held)
	}
	if c.bodyLen != len(body) {
		t.Fatalf("bodyLen %d", c.bodyLen)
	}

	const size = 36 << 20
	rr := responseRecords.Get().(*responseRecord) // a stored create's, given back on release
	c.record = rr
	rr.scanner.Reset(64 << 20)
	rr.scanner.Feed([]byte("event: response.created\ndata: " + strings.Repeat("i", size) + "\n\n"))
	if ev, ok, err := rr.scanner.Next(); !ok || err != nil || len(ev.Data) != size {
		t.Fatalf("event: %d bytes, %v", len(ev.Data), err)
	}
	c.renamed = make([]byte, 0, 2<<20)
	c.release()
	if n := rr.scanner.Cap() + cap(c.body) + cap(c.spliced) + cap(c.renamed); n > 3*parse.MaxKeptBuffer {
		t.Fatalf("a released call keeps %d bytes", n)
	}
}
