package upstream

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/modelgate/gateway/affinity"
)

// Route is the set of deployments of one family serving one model, on its
// affinity ring. Immutable once built; safe for concurrent use.
type Route struct {
	ring *affinity.Ring
	deps []*Deployment
	// load is deployment i's calls in flight (a func value built once, so
	// that the ring's PickLeast does not allocate; tests replace it).
	load func(i int) int64
	// balance bounds a session's deployment to balance × the average calls
	// in flight (see chooseBounded); 0: sessions stay whatever the load.
	balance float64
}

// NewRoute makes the route over deps, in their order, with sessions bound by
// balance (config routing.balance_factor; 0 turns the bound off).
func NewRoute(deps []*Deployment, balance float64) (*Route, error) {
	names := make([]string, len(deps))
	for i, d := range deps {
		names[i] = d.name
	}
	ring, err := affinity.New(names)
	if err != nil {
		return nil, err
	}
	r := &Route{ring: ring, deps: deps, balance: balance}
	r.load = func(i int) int64 { return r.deps[i].inflight.Load() }
	return r, nil
}

// Deployments returns the route's deployments; the caller must not change
// the slice.
func (r *Route) Deployments() []*Deployment { return r.deps }

// Pick chooses a deployment: by the session when keyed, keyHash being
// affinity.Hash of the session key (hashed once per call, by the caller),
// else the cheaper of two (see chooseCheaper). Deployments in cooldown and
// those in tried are skipped; when every untried one is in cooldown,
// cooldown is ignored (better to try a deployment that may have recovered
// than to fail). It returns the chosen index, for tried, or -1 and nil when
// every deployment was tried.
func (r *Route) Pick(keyHash uint64, keyed bool, tried affinity.Set) (int, *Deployment) {
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
	i := r.choose(keyHash, keyed, ex)
	if i < 0 {
		i = r.choose(keyHash, keyed, tried)
	}
	if i < 0 {
		return -1, nil
	}
	r.deps[i].Stats.picked(keyed && r.ring.PickHash(keyHash, 0) != i)
	return i, r.deps[i]
}

func (r *Route) choose(keyHash uint64, keyed bool, ex affinity.Set) int {
	if keyed {
		return r.chooseBounded(keyHash, ex)
	}
	return r.chooseCheaper(rand.Uint64(), ex)
}

// chooseCheaper is the power of two choices on peak-EWMA cost: of two
// deployments not in ex drawn at random by rnd, the one whose time to first
// byte times its calls in flight and this one is lower (see peakEWMA.cost);
// the first on a tie.
func (r *Route) chooseCheaper(rnd uint64, ex affinity.Set) int {
	a, b := r.ring.PickTwo(rnd, ex)
	if b < 0 {
		return a
	}
	now := monoNow()
	if r.cost(b, now) < r.cost(a, now) {
		return b
	}
	return a
}

// cost is deployment i's peak-EWMA cost at now.
func (r *Route) cost(i int, now int64) float64 { return r.deps[i].ttfb.cost(r.load(i), now) }

// chooseBounded is consistent hashing with bounded loads (Mirrokni et al.;
// HAProxy's hash-balance-factor): the session's first choice on the ring
// among the deployments not in ex, unless its calls in flight have reached
// the bound (see bound); then its next choice, and so on. Only the
// sessions of a deployment at its bound move, each to its own next choice,
// and they come back as soon as the load falls below the bound.
func (r *Route) chooseBounded(keyHash uint64, ex affinity.Set) int {
	first := r.ring.PickHash(keyHash, ex)
	if first < 0 || r.balance == 0 {
		return first
	}
	bound := r.bound(ex)
	for i := first; i >= 0; i = r.ring.PickHash(keyHash, ex) {
		if r.load(i) < bound {
			return i
		}
		ex = ex.With(i)
	}
	return first // loads moved under the walk: none was below the bound
}

// bound is the calls in flight a deployment not in ex may have before it
// takes one more: ceil((total + 1) × balance / n), total being the calls in
// flight on the n deployments not in ex, and the 1 the new call. Some
// deployment is always below it, since the least loaded has at most the
// average.
func (r *Route) bound(ex affinity.Set) int64 {
	var total int64
	n := 0
	for i := range r.deps {
		if !ex.Has(i) {
			total += max(r.load(i), 0)
			n++
		}
	}
	return int64(math.Ceil(float64(total+1) * r.balance / float64(n)))
}
