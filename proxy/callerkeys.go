package proxy

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/admin"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/proxy/promtext"
	"github.com/modelgate/gateway/store"
)

// Callers' keys at runtime (docs/keys.md): the gateway keeps the snapshot of its
// keys.Syncer (the config's keys and the store's) that intake.go authenticates against
// and checks a key's models with (verifyKey, allowModel), shows a key only the models it
// may use, and serves the admin API of the keys on the admin listener.

// setupKeys makes the syncer of the keys, on ks when not nil (Options.Keys), and the admin
// API; it runs before the first Reload, which puts the config's keys in force.
func (g *Gateway) setupKeys(ks store.KeyStore) {
	g.keys = keys.NewSyncer(nil, keys.SyncOptions{Store: ks, OnSwap: g.keysSwapped, Logger: g.log})
	if ks != nil {
		g.keys.Refresh() // a node serves the stored keys from the start when it can
	}
	g.admin = admin.New(admin.Options{Store: ks, Keys: g.keys, Models: g.modelIDs, Budgets: g.budgetNames,
		Logger: g.log, Metrics: g.obs.set, Tokens: g.adminTokens.Load})
	g.obs.set.RegisterMetricsWriter(g.writeKeyMetrics)
}

// keysSwapped hands the limits of the keys in force to the rate limiter and
// their budgets to the spend ledger (the config's named budgets with them),
// as a reload does: a key made or changed through the admin API has its
// budget in force on each node once its change reaches the node's snapshot.
// Swaps are serialized by the syncer, and a reload swaps after it stores its
// state, so the last update reflects the latest config and keys.
func (g *Gateway) keysSwapped(s *keys.Snapshot) {
	st := g.state.Load()
	if st == nil {
		return // the first Reload puts them in force
	}
	g.limits.Update(s.Limits(), st.cfg.RateLimit)
	g.spend.ledger.Update(s.Budgets(), st.cfg.Budgets, st.cfg.RateLimit)
}

// modelIDs returns the ids of the configured models.
func (g *Gateway) modelIDs() []string {
	cfg := g.state.Load().cfg
	ids := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		ids[i] = m.ID
	}
	return ids
}

// budgetNames returns the names of the configured budgets.
func (g *Gateway) budgetNames() []string {
	cfg := g.state.Load().cfg
	names := make([]string, len(cfg.Budgets))
	for i, b := range cfg.Budgets {
		names[i] = b.Name
	}
	return names
}

// StartKeys follows the store's changes of the keys until the returned stop is called.
func (g *Gateway) StartKeys() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.keys.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// Keys returns the gateway's syncer of the callers' keys.
func (g *Gateway) Keys() *keys.Syncer { return g.keys }

// visibleModels returns body, a model list or one model's entry of the family, with only
// the models the caller's key may use; nil when it may use none of the one asked.
func (c *call) visibleModels(body []byte, fam family.Family) []byte {
	if c.access == nil || body == nil {
		return body
	}
	if id := modelParam(c.ctx); id != "" {
		if !c.access.AllowsString(id) {
			return nil
		}
		return body
	}
	var page map[string]json.RawMessage
	var data []json.RawMessage
	if json.Unmarshal(body, &page) != nil || json.Unmarshal(page["data"], &data) != nil {
		return body
	}
	kept := data[:0]
	var first, last json.RawMessage
	for _, m := range data {
		var e struct{ ID string }
		if json.Unmarshal(m, &e) == nil && c.access.AllowsString(e.ID) {
			kept = append(kept, m)
			id, _ := json.Marshal(e.ID)
			if first == nil {
				first = id
			}
			last = id
		}
	}
	page["data"], _ = json.Marshal(kept)
	if fam == family.Alpha {
		page["first_id"], page["last_id"] = nullIfEmpty(first), nullIfEmpty(last)
	}
	out, _ := json.Marshal(page)
	return out
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

// adminAllowed reports whether the request may read /status and /metrics: with
// admin.require_token, only with an admin token (else it answers 401).
func (g *Gateway) adminAllowed(ctx *fasthttp.RequestCtx) bool {
	if !g.state.Load().cfg.Admin.RequireToken {
		return true
	}
	_, ok := g.adminTokens.Load().Verify(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
	if !ok {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="admin"`)
		ctx.Error("unauthorized: this page needs an admin token (Authorization: Bearer <token>)\n", fasthttp.StatusUnauthorized)
	}
	return ok
}

// writeKeyMetrics writes the figures of the keys' syncer.
func (g *Gateway) writeKeyMetrics(w io.Writer) {
	s := g.keys.Stats()
	b := make([]byte, 0, 1024)
	b = appendGauge(b, "gateway_keys", "gauge", "callers' keys in force on this node (config and store)", int64(s.Keys))
	b = appendGauge(b, "gateway_keys_version", "gauge", "the store's version of the keys this node's snapshot reflects", int64(s.Version))
	if s.Age >= 0 {
		b = promtext.AppendMetadata(b, "gateway_keys_snapshot_age_seconds", "gauge", "time since this node last read the keys' store successfully")
		b = append(b, "gateway_keys_snapshot_age_seconds "...)
		b = strconv.AppendFloat(b, s.Age.Seconds(), 'f', 3, 64)
		b = append(b, '\n')
	}
	b = promtext.AppendMetadata(b, "gateway_keys_refreshes_total", "counter", "refreshes of the keys' snapshot, by kind: full reloads, changed records only, failures")
	for _, r := range []struct {
		kind string
		n    uint64
	}{{"full", s.Full}, {"partial", s.Partial}, {"failed", s.Failures}} {
		b = append(b, `gateway_keys_refreshes_total{kind="`+r.kind+`"} `...)
		b = strconv.AppendUint(b, r.n, 10)
		b = append(b, '\n')
	}
	w.Write(b)
}

func appendGauge(b []byte, name, typ, help string, v int64) []byte {
	b = promtext.AppendMetadata(b, name, typ, help)
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

// keysStatus is the keys' line of the status page.
func (g *Gateway) keysStatus() string {
	s := g.keys.Stats()
	line := strconv.Itoa(s.Keys) + " in force"
	if s.Age < 0 {
		return line + " (config only: no store keeps keys)"
	}
	return line + ", store version " + strconv.FormatUint(s.Version, 10) + ", read " +
		s.Age.Round(time.Millisecond).String() + " ago"
}
