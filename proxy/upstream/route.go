package upstream

import (
	"math/rand/v2"
	"time"

	"github.com/modelgate/gateway/affinity"
)

// Route is the set of deployments of one family serving one model, on its
// affinity ring. Immutable once built; safe for concurrent use.
type Route struct {
	ring *affinity.Ring
	deps []*Deployment
	load func(i int) int64
}

// NewRoute makes the route over deps, in their order.
func NewRoute(deps []*Deployment) (*Route, error) {
	names := make([]string, len(deps))
	for i, d := range deps {
		names[i] = d.name
	}
	ring, err := affinity.New(names)
	if err != nil {
		return nil, err
	}
	r := &Route{ring: ring, deps: deps}
	r.load = func(i int) int64 { return r.deps[i].inflight.Load() }
	return r, nil
}

// Deployments returns the route's deployments; the caller must not change
// the slice.
func (r *Route) Deployments() []*Deployment { return r.deps }

// Pick chooses a deployment: by the session key when there is one, else the
// less loaded of two. Deployments in cooldown and those in tried are skipped;
// when every untried one is in cooldown, cooldown is ignored (better to try a
// deployment that may have recovered than to fail). It returns the chosen
// index, for tried, or -1 and nil when every deployment was tried.
func (r *Route) Pick(key []byte, tried affinity.Set) (int, *Deployment) {
	ex := tried
	var now int64 // read only when some deployment has been excluded
	for i, d := range r.deps {
		until := d.downUntil.Load()
		if until == 0 {
			continue
		}
		if now == 0 {
			now = time.Now().UnixNano()
		}
		if until > now {
			ex = ex.With(i)
		}
	}
	i := r.choose(key, ex)
	if i < 0 {
		i = r.choose(key, tried)
	}
	if i < 0 {
		return -1, nil
	}
	r.deps[i].Stats.picked(len(key) > 0 && ex != 0 && r.ring.Pick(key, 0) != i)
	return i, r.deps[i]
}

func (r *Route) choose(key []byte, ex affinity.Set) int {
	if len(key) > 0 {
		return r.ring.Pick(key, ex)
	}
	return r.ring.PickLeast(rand.Uint64(), ex, r.load)
}
