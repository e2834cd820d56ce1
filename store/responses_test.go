package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func testResponsePutGetDelete(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	r := Response{ID: "resp_abc", Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
	if err := p.PutResponse(r); err != nil {
		t.Fatalf("PutResponse: %v", err)
	}
	check := func(p Store, want Response) {
		t.Helper()
		got, err := p.GetResponse(want.ID)
		if err != nil {
			t.Fatalf("GetResponse: %v", err)
		}
		if got.ID != want.ID || got.Owner != want.Owner || got.Model != want.Model ||
			got.Deployment != want.Deployment || !got.Created.Equal(want.Created) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	check(p, r)
	_, err := p.GetResponse("resp_missing")
	wantNotFound(t, "GetResponse(missing)", err)

	p = e.reopen(p)
	check(p, r)

	// A replacement wins, also after reopen.
	r2 := r
	r2.Deployment, r2.Created = "beta-west", t0.Add(time.Hour)
	if err := p.PutResponse(r2); err != nil {
		t.Fatalf("PutResponse(replace): %v", err)
	}
	p = e.reopen(p)
	check(p, r2)

	if err := p.DeleteResponse(r.ID); err != nil {
		t.Fatalf("DeleteResponse: %v", err)
	}
	_, err = p.GetResponse(r.ID)
	wantNotFound(t, "GetResponse(deleted)", err)
	wantNotFound(t, "DeleteResponse(again)", p.DeleteResponse(r.ID))
	p = e.reopen(p)
	_, err = p.GetResponse(r.ID)
	wantNotFound(t, "GetResponse(deleted, reopened)", err)
	// The replaced record's age entry is reclaimed without counting as a record.
	n, err := p.ReclaimResponses(t0.Add(24 * time.Hour))
	if err != nil || n != 0 {
		t.Fatalf("ReclaimResponses = %d, %v; want 0, nil", n, err)
	}
	if keys := e.allKeys(p); len(keys) != 0 {
		t.Fatalf("keys left behind: %q", keys)
	}
}

func TestResponseReclaimByAge(t *testing.T) {
	e := newMemEnv(t, PebbleOptions{})
	p := e.open()
	const n = 300 // more than one reclaim group
	for i := range n {
		r := Response{ID: fmt.Sprintf("resp_%04d", i), Owner: "o", Model: "m", Deployment: "d",
			Created: t0.Add(time.Duration(i) * time.Minute)}
		if err := p.PutResponse(r); err != nil {
			t.Fatalf("PutResponse: %v", err)
		}
	}
	// Replace one old record with a young one: its stale age entry must not reclaim it.
	young := Response{ID: "resp_0000", Owner: "o", Model: "m", Deployment: "d", Created: t0.Add(1000 * time.Minute)}
	if err := p.PutResponse(young); err != nil {
		t.Fatalf("PutResponse: %v", err)
	}
	cut := t0.Add(200 * time.Minute) // records 0..199 are older; 0 was replaced
	got, err := p.ReclaimResponses(cut)
	if err != nil || got != 199 {
		t.Fatalf("ReclaimResponses = %d, %v; want 199, nil", got, err)
	}
	p = e.reopen(p)
	for i := range n {
		id := fmt.Sprintf("resp_%04d", i)
		_, err := p.GetResponse(id)
		switch {
		case i == 0 || i >= 200:
			if err != nil {
				t.Fatalf("GetResponse(%s): %v", id, err)
			}
		default:
			wantNotFound(t, "GetResponse("+id+")", err)
		}
	}
	// Idempotent: nothing more to reclaim before the same cut.
	if got, err := p.ReclaimResponses(cut); err != nil || got != 0 {
		t.Fatalf("second ReclaimResponses = %d, %v; want 0, nil", got, err)
	}
	if keys := p.rawKeys(t, prefixResponseAge); len(keys) != 101 {
		t.Fatalf("%d age keys, want 101", len(keys))
	}
}

func testResponseInvalid(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	long := string(make([]byte, MaxResponseIDLen+1))
	ok := Response{ID: "resp_1", Owner: "o", Model: "m", Deployment: "d", Created: t0}
	f := func(name string, mutate func(r *Response)) {
		t.Helper()
		r := ok
		mutate(&r)
		if err := p.PutResponse(r); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: PutResponse error %v, want ErrInvalid", name, err)
		}
	}
	f("empty id", func(r *Response) { r.ID = "" })
	f("long id", func(r *Response) { r.ID = long })
	f("empty owner", func(r *Response) { r.Owner = "" })
	f("NUL owner", func(r *Response) { r.Owner = "a\x00b" })
	f("empty model", func(r *Response) { r.Model = "" })
	f("empty deployment", func(r *Response) { r.Deployment = "" })
	_, err := p.GetResponse(long)
	wantNotFound(t, "GetResponse(long)", err)
	_, err = p.GetResponse("")
	wantNotFound(t, "GetResponse(empty)", err)
	if keys := e.allKeys(p); len(keys) != 0 {
		t.Fatalf("invalid puts wrote keys: %q", keys)
	}
}
