package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/modelgate/gateway/proxy/config"
)

// The callers' keys and the keys' rate limits are wired to the engine the
// config names, whatever wraps it: on redis, with the files' bytes in object
// storage or not, the limits are the cluster's; on pebble they are in memory.
func TestStoreWiring(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String() // nothing answers there: the engines open all the same
	ln.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := func(store string, shared bool) {
		t.Helper()
		y := store + `
keys:
  - {id: team-a, key: sk-a}
upstreams:
  - {name: u1, family: beta, base_url: "http://` + dead + `/v1", api_key: up}
models:
  - {id: m, upstreams: [u1]}
`
		cfg, err := config.Parse([]byte(y), func(name string) (string, bool) { return "secret-" + name, true })
		if err != nil {
			t.Fatal(err)
		}
		st, wired, err := openStore(cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if wired.keys == nil {
			t.Errorf("%s: the callers' keys are not wired to the store", store)
		}
		if got := wired.limits.Redis != nil; got != shared {
			t.Errorf("%s: the rate limits shared on the cluster: %v, want %v", store, got, shared)
		}
	}
	f(fmt.Sprintf("store: {engine: pebble, path: %q}", t.TempDir()), false)
	f(fmt.Sprintf("store: {engine: redis, addrs: [%q]}", dead), true)
	f(fmt.Sprintf(`store:
  engine: redis
  addrs: [%q]
  blobs: {engine: s3, endpoint: "http://%s", bucket: b, region: us-east-1, path_style: true, access_key_env: AK, secret_key_env: SK}`, dead, dead), true)
}
