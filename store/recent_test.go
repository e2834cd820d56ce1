package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A record read back from the recent ones is the record Pebble reads: the
// same fields, Created in UTC at the nanosecond, whatever form the caller
// gave it in.
func TestRecentResponseReadsAsStored(t *testing.T) {
	for i, created := range []time.Time{
		time.Date(2026, 11, 25, 11, 0, 0, 123456789, time.FixedZone("x", 3600)),
		time.Now(), // with a monotonic reading
		{},         // the zero time
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	} {
		e := newMemEnv(t, PebbleOptions{})
		p := e.open()
		r := Response{ID: fmt.Sprintf("resp_recent%d", i), Owner: "o", Model: "m", Deployment: "d", Created: created}
		if err := p.PutResponse(r); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.recent.get(r.ID); !ok {
			t.Fatal("a record just put is not held")
		}
		held, err := p.GetResponse(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		p = e.reopen(p)
		if _, ok := p.recent.get(r.ID); ok {
			t.Fatal("a reopened store holds a record it has not put")
		}
		stored, err := p.GetResponse(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if held != stored {
			t.Fatalf("created %v: held %#v, stored %#v", created, held, stored)
		}
		if _, ok := p.recent.get(r.ID); ok {
			t.Fatal("a read that missed filled the recent records")
		}
	}
}

// A deleted or reclaimed record is gone at once from the instance that
// removed it, not only after a reopen; a replaced one reads as its
// replacement.
func TestRecentResponseRemoved(t *testing.T) {
	e := newMemEnv(t, PebbleOptions{})
	p := e.open()
	put := func(id string, created time.Time) {
		t.Helper()
		if err := p.PutResponse(Response{ID: id, Owner: "o", Model: "m", Deployment: "d", Created: created}); err != nil {
			t.Fatal(err)
		}
	}
	put("resp_deleted", t0)
	put("resp_reclaimed", t0)
	put("resp_replaced", t0)
	put("resp_replaced", t0.Add(time.Hour))
	put("resp_kept", t0.Add(time.Hour))
	if err := p.DeleteResponse("resp_deleted"); err != nil {
		t.Fatal(err)
	}
	if n, err := p.ReclaimResponses(t0.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("ReclaimResponses = %d, %v; want 1", n, err)
	}
	for _, id := range []string{"resp_deleted", "resp_reclaimed"} {
		_, err := p.GetResponse(id)
		wantNotFound(t, "GetResponse("+id+")", err)
	}
	for _, id := range []string{"resp_replaced", "resp_kept"} {
		if r, err := p.GetResponse(id); err != nil || !r.Created.Equal(t0.Add(time.Hour)) {
			t.Fatalf("GetResponse(%s) = %+v, %v", id, r, err)
		}
	}
}

// Two ids that share a slot: the later one displaces the earlier, which
// still reads from Pebble; removing one leaves the other's slot alone.
func TestRecentResponseSlotShared(t *testing.T) {
	e := newMemEnv(t, PebbleOptions{})
	p := e.open()
	a := "resp_a"
	var b string
	for i := 0; b == ""; i++ {
		if id := fmt.Sprintf("resp_b%d", i); p.recent.slot(id) == p.recent.slot(a) {
			b = id
		}
	}
	for _, id := range []string{a, b} {
		if err := p.PutResponse(Response{ID: id, Owner: "owner-" + id, Model: "m", Deployment: "d", Created: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := p.recent.get(a); ok {
		t.Fatal("a displaced record is still held")
	}
	for _, id := range []string{a, b} {
		if r, err := p.GetResponse(id); err != nil || r.Owner != "owner-"+id {
			t.Fatalf("GetResponse(%s) = %+v, %v", id, r, err)
		}
	}
	if err := p.DeleteResponse(a); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.recent.get(b); !ok {
		t.Fatal("deleting one id emptied another id's slot")
	}
}

// Puts and deletes of the same ids racing on every core leave the recent
// records agreeing with Pebble: each id reads the same with and without them.
func TestRecentResponseRaces(t *testing.T) {
	e := newMemEnv(t, PebbleOptions{})
	p := e.open()
	const ids, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := fmt.Sprintf("resp_%d", (i+w)%ids)
				if (i+w)%3 == 0 {
					if err := p.DeleteResponse(id); err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
					}
					continue
				}
				r := Response{ID: id, Owner: fmt.Sprintf("o%d", w), Model: "m", Deployment: "d", Created: t0.Add(time.Duration(i))}
				if err := p.PutResponse(r); err != nil {
					t.Error(err)
				}
				if _, err := p.GetResponse(id); err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	held := make(map[string]Response)
	for i := range ids {
		id := fmt.Sprintf("resp_%d", i)
		if r, err := p.GetResponse(id); err == nil {
			held[id] = r
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	p = e.reopen(p)
	for i := range ids {
		id := fmt.Sprintf("resp_%d", i)
		r, err := p.GetResponse(id)
		if want, ok := held[id]; ok != (err == nil) || (ok && r != want) {
			t.Fatalf("%s: read %+v (held: %v) before the reopen, %+v, %v after", id, want, ok, r, err)
		}
	}
}
