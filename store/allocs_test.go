//go:build !race

package store

import "testing"

// A lookup of a record allocates nothing once its names have been read
// before: the key is pooled and the owner, model and deployment interned.
func TestGetResponseAllocatesNothing(t *testing.T) {
	p := newDiskEnv(t, PebbleOptions{}).open()
	r := Response{ID: "resp_alloc", Owner: "team-a", Model: "model-x", Deployment: "beta-east", Created: t0}
	if err := p.PutResponse(r); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		got, err := p.GetResponse(r.ID)
		if err != nil || got != r {
			t.Fatalf("%+v %v", got, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
}
