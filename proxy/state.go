package proxy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/trace"
	"github.com/modelgate/gateway/proxy/upstream"
)

// state is one loaded config: immutable once built, swapped atomically on
// reload, so a request sees one consistent view from start to end.
type state struct {
	cfg    *config.Config
	keys   Verifier
	certs  certKeys // keys[].client_cert
	deps   map[string]*upstream.Deployment
	models map[string]*model
	groups map[string]map[string]bool
	// modelList is the precomputed body of GET /v1/models.
	modelList []byte
	// lists holds the other model list bodies; see models.go.
	lists modelLists
	// loaded is when the config was put in force; fingerprint names it.
	loaded      time.Time
	fingerprint string
	// hasFamily tells which families have at least one deployment.
	hasFamily [family.Count]bool
	// tracer makes the calls' spans; nil with tracing off (see tracing.go).
	tracer *trace.Tracer
}

// model is a routable model: per family, the ring of its deployments.
type model struct {
	id     string
	image  bool
	routes [family.Count]*upstream.Route
	// grouped holds, per group name, the routes restricted to that group.
	grouped map[string]*[family.Count]*upstream.Route
	// renamed holds, by deployment name, what the deployments that know the model
	// by another name call it; nil when none does.
	renamed map[string]providerModel
	// self is the model's id as sent in a body, for a call that falls back
	// to it on a deployment that does not rename it; fallbacks are the
	// models of models[].fallbacks, in order (see fallback.go).
	self      providerModel
	fallbacks []*model
	stats     modelStats // request counters; see observe.go
	tokens    tokenStats // token counters per key id; see tokenusage.go
}

// buildState makes a state from cfg, reusing unchanged deployments of prev so
// their pools and health survive a reload.
func buildState(cfg *config.Config, keys Verifier, prev *state, now time.Time) (*state, error) {
	st := &state{
		cfg:    cfg,
		keys:   keys,
		certs:  newCertKeys(cfg.Keys),
		deps:   make(map[string]*upstream.Deployment, len(cfg.Upstreams)),
		models: make(map[string]*model, len(cfg.Models)),
		groups: make(map[string]map[string]bool, len(cfg.Groups)),
		loaded: now, fingerprint: fingerprint(cfg),
	}
	for _, u := range cfg.Upstreams {
		fam, _ := family.Parse(u.Family)
		if prev != nil {
			if d, ok := prev.deps[u.Name]; ok && d.Same(u, cfg.Timeouts, cfg.Health, cfg.Limits) {
				d.SetDecay(cfg.Routing.Decay.D())
				st.deps[u.Name] = d
				st.hasFamily[fam] = true
				continue
			}
		}
		d := upstream.New(u, cfg.Timeouts, cfg.Health, cfg.Limits)
		d.SetDecay(cfg.Routing.Decay.D())
		st.deps[u.Name] = d
		st.hasFamily[fam] = true
	}
	for _, g := range cfg.Groups {
		members := make(map[string]bool, len(g.Upstreams))
		for _, n := range g.Upstreams {
			members[n] = true
		}
		st.groups[g.Name] = members
	}
	for _, mc := range cfg.Models {
		m, err := st.newModel(mc)
		if err != nil {
			return nil, err
		}
		st.models[mc.ID] = m
	}
	for _, mc := range cfg.Models {
		m := st.models[mc.ID]
		for _, id := range mc.Fallbacks {
			m.fallbacks = append(m.fallbacks, st.models[id])
		}
	}
	if err := st.renderModelLists(modelEntries(cfg, prev, now)); err != nil {
		return nil, err
	}
	return st, nil
}

// newModel makes the routes of mc over the state's deployments: per family,
// and per group when there are groups.
func (st *state) newModel(mc config.Model) (*model, error) {
	m := &model{id: mc.ID, image: mc.Image, renamed: providerModels(mc)}
	lit, _ := json.Marshal(mc.ID) // a string always marshals
	m.self = providerModel{json: lit, name: mc.ID}
	var err error
	if m.routes, err = st.routesFor(mc, nil); err != nil {
		return nil, fmt.Errorf("models %q: %w", mc.ID, err)
	}
	if len(st.groups) == 0 {
		return m, nil
	}
	m.grouped = make(map[string]*[family.Count]*upstream.Route, len(st.groups))
	for name, members := range st.groups {
		rs, err := st.routesFor(mc, members)
		if err != nil {
			return nil, fmt.Errorf("models %q, group %q: %w", mc.ID, name, err)
		}
		m.grouped[name] = &rs
	}
	return m, nil
}

// providerModel is a deployment's own name for a model: as sent in a JSON body (a
// string literal with its quotes) and as it stands in a gamma path.
type providerModel struct {
	json []byte
	name string
}

func providerModels(mc config.Model) map[string]providerModel {
	var m map[string]providerModel
	for _, mu := range mc.Upstreams {
		if mu.Model == "" || mu.Model == mc.ID {
			continue
		}
		if m == nil {
			m = make(map[string]providerModel)
		}
		lit, _ := json.Marshal(mu.Model) // a string always marshals
		m[mu.Name] = providerModel{json: lit, name: mu.Model}
	}
	return m
}

func (st *state) routesFor(mc config.Model, members map[string]bool) ([family.Count]*upstream.Route, error) {
	var byFam [family.Count][]*upstream.Deployment
	for _, mu := range mc.Upstreams {
		if members != nil && !members[mu.Name] {
			continue
		}
		d := st.deps[mu.Name]
		byFam[d.Family()] = append(byFam[d.Family()], d)
	}
	var routes [family.Count]*upstream.Route
	for fam, deps := range byFam {
		if len(deps) == 0 {
			continue
		}
		r, err := upstream.NewRoute(deps, st.cfg.Routing.Balance())
		if err != nil {
			return routes, err
		}
		routes[fam] = r
	}
	return routes, nil
}

// routeFor returns the model's route for a family, restricted to group when
// group is not empty. ok is false when the model is unknown.
func (st *state) routeFor(modelID []byte, fam family.Family, group []byte) (m *model, r *upstream.Route, ok bool) {
	m, ok = st.models[b2s(modelID)]
	if !ok {
		return nil, nil, false
	}
	if len(group) == 0 {
		return m, m.routes[fam], true
	}
	rs := m.grouped[b2s(group)]
	if rs == nil {
		return m, nil, true
	}
	return m, rs[fam], true
}

type modelEntry struct {
	ID                  string         `json:"id"`
	Object              string         `json:"object"`
	Created             int64          `json:"created"`
	OwnedBy             string         `json:"owned_by"`
	SupportedParameters []string       `json:"supported_parameters"`
	Reasoning           reasoningEntry `json:"reasoning"`
}

type reasoningEntry struct {
	SupportedEfforts  []string `json:"supported_efforts"`
	DefaultEffort     string   `json:"default_effort"`
	DefaultEnabled    bool     `json:"default_enabled"`
	SupportsMaxTokens bool     `json:"supports_max_tokens"`
	Mandatory         bool     `json:"mandatory"`
}

// modelEntries are the entries of GET /v1/models. A model without a
// reasoning block is shown with no efforts and default_effort "none".
// created is the config's value, else the time the model was first loaded by
// this process (kept across reloads).
func modelEntries(cfg *config.Config, prev *state, now time.Time) []modelEntry {
	firstSeen := map[string]int64{}
	if prev != nil {
		var old struct{ Data []modelEntry }
		if err := json.Unmarshal(prev.modelList, &old); err == nil {
			for _, e := range old.Data {
				firstSeen[e.ID] = e.Created
			}
		}
	}
	entries := make([]modelEntry, 0, len(cfg.Models))
	for _, mc := range cfg.Models {
		e := modelEntry{
			ID:                  mc.ID,
			Object:              "model",
			Created:             mc.Created,
			OwnedBy:             mc.OwnedBy,
			SupportedParameters: []string{},
			Reasoning:           reasoningEntry{SupportedEfforts: []string{}, DefaultEffort: "none"},
		}
		if e.Created == 0 {
			if t, ok := firstSeen[mc.ID]; ok {
				e.Created = t
			} else {
				e.Created = now.Unix()
			}
		}
		hasReasoning := false
		for _, p := range mc.SupportedParameters {
			hasReasoning = hasReasoning || p == "reasoning"
			e.SupportedParameters = append(e.SupportedParameters, p)
		}
		if r := mc.Reasoning; r != nil {
			if !hasReasoning {
				e.SupportedParameters = append(e.SupportedParameters, "reasoning")
			}
			e.Reasoning = reasoningEntry{
				SupportedEfforts:  r.SupportedEfforts,
				DefaultEffort:     r.DefaultEffort,
				DefaultEnabled:    r.DefaultEnabled,
				SupportsMaxTokens: r.SupportsMaxTokens,
				Mandatory:         r.Mandatory,
			}
		}
		entries = append(entries, e)
	}
	return entries
}
