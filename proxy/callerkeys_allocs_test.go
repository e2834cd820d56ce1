//go:build !race

package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/store"
)

// A call with a key made at runtime, among many, restricted to some models, allocates
// nothing more than one with a config key: the lookup and the model check read the
// snapshot.
func TestRuntimeKeyRequestAllocatesNothing(t *testing.T) {
	p, err := store.OpenPebble("keys", store.PebbleOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for i := range 1000 {
		r := keys.Record{ID: fmt.Sprintf("k%d", i), Digest: keys.DigestOf(fmt.Sprintf("runtime-%d", i)),
			Models: []string{"n", "m*"}, CreatedAt: time.Now()}
		if _, err := p.PutKey(r.ID, r.Encode(), nil); err != nil {
			t.Fatal(err)
		}
	}
	h := newHotBenchWith(t, Options{Store: p, Keys: p})
	if _, err := h.gw.Keys().Refresh(); err != nil {
		t.Fatal(err)
	}
	req, resp := h.warmRequest(t, hotBody)
	req.Header.Set("Authorization", "Bearer runtime-500")
	h.do(t, req, resp)
	if resp.StatusCode() != 200 {
		t.Fatalf("a runtime key: %d %s", resp.StatusCode(), resp.Body())
	}
	allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) })
	if allocs != 0 {
		t.Fatalf("%v allocations per proxied request with a runtime key", allocs)
	}
}
