package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

// demoUpstream is the offline demo: two in-process simulator deployments that
// speak every family, and a config routing demo models to them. Its store is
// -data, or ./data; when another process holds ./data (a first demo), a
// temporary directory, removed by Close.
type demoUpstream struct {
	sims    []*sim.Server
	cfg     *config.Config
	addr    string
	key     string
	models  []string
	ownData bool   // the store directory was given with -data
	tmp     string // the temporary store directory, or ""
}

const demoKey = "demo-key"

func startDemo(dataDir string) (*demoUpstream, error) {
	d := &demoUpstream{key: demoKey, models: []string{"demo-chat", "demo-image"}, ownData: dataDir != ""}
	var yaml string
	yaml += "keys:\n  - {id: demo, key: " + demoKey + "}\nupstreams:\n"
	var names []string
	for _, n := range []string{"sim-a", "sim-b"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: n, AlphaKey: "sim-alpha", BetaKey: "sim-beta", GammaKey: "sim-gamma", NoRecord: true})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("cannot start the bundled simulator: %w", err)
		}
		d.sims = append(d.sims, s)
		base := "http://" + s.Addr()
		yaml += fmt.Sprintf("  - {name: %s-alpha, family: alpha, base_url: %q, api_key: sim-alpha}\n", n, base)
		yaml += fmt.Sprintf("  - {name: %s-beta, family: beta, base_url: %q, api_key: sim-beta}\n", n, base+"/v1")
		yaml += fmt.Sprintf("  - {name: %s-gamma, family: gamma, base_url: %q, api_key: sim-gamma}\n", n, base)
		names = append(names, n+"-alpha", n+"-beta", n+"-gamma")
	}
	d.addr = d.sims[0].Addr() + "," + d.sims[1].Addr()
	yaml += "models:\n"
	yaml += fmt.Sprintf("  - {id: demo-chat, upstreams: [%s, %s, %s, %s], reasoning: {supported_efforts: [low, medium, high, max], default_effort: medium, default_enabled: true}}\n",
		names[0], names[1], names[3], names[4])
	yaml += fmt.Sprintf("  - {id: demo-image, image: true, upstreams: [%s, %s, %s, %s]}\n", names[1], names[2], names[4], names[5])
	yaml += fmt.Sprintf("groups:\n  - {name: a, upstreams: [%s, %s, %s]}\n  - {name: b, upstreams: [%s, %s, %s]}\n",
		names[0], names[1], names[2], names[3], names[4], names[5])
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("BUG: demo config: %w", err)
	}
	if dataDir != "" {
		cfg.Store.Path = dataDir
	}
	d.cfg = cfg
	return d, nil
}

// orTempStore returns st and err, the outcome of opening the demo's store,
// unless that store is the default ./data and another process holds it: then
// it opens a store in a temporary directory, and says so.
func (d *demoUpstream) orTempStore(cfg *config.Config, st store.Store, wired storeWiring, err error, log *slog.Logger) (store.Store, storeWiring, error) {
	if d.ownData || !errors.Is(err, store.ErrLocked) {
		return st, wired, err
	}
	dir, err := os.MkdirTemp("", "gateway-demo-")
	if err != nil {
		return nil, storeWiring{}, fmt.Errorf("cannot make a temporary store directory: %w", err)
	}
	d.tmp = dir
	log.Warn("another process holds the demo's store "+cfg.Store.Path+": this demo keeps its data in a temporary directory, removed at exit (-data DIR chooses one)",
		"store", dir)
	cfg.Store.Path = dir
	return openStore(cfg, log)
}

func (d *demoUpstream) Close() {
	for _, s := range d.sims {
		s.Close()
	}
	if d.tmp != "" {
		os.RemoveAll(d.tmp)
	}
}
