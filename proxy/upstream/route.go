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
	// shares is each session's share of the recent keyed picks, so that
	// heavy sessions move first, and homes where the sessions that moved
	// went (both nil when balance is 0).
	shares *sessionShares
	homes  *secondHomes
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
	if balance != 0 {
		r.shares = new(sessionShares)
		r.homes = new(secondHomes)
	}
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
// HAProxy's hash-balance-factor), heavy sessions first. Every session has a
// limit of its own below the bound (see sessionLimit): the heavier it is, the
// lower, so that a deployment whose sessions ask more than its bound sheds
// its heavy sessions before its calls in flight reach the bound, and the
// light sessions homed there stay. A session goes to its first choice on the
// ring among the deployments not in ex unless that one's calls in flight
// have reached the session's limit; then to its next choice, and so on. When
// every deployment is at the session's limit, it goes to its first choice
// below the bound, as a light one would: the bound holds whatever the
// weights.
//
// A session that left its first choice stays where it went (its second
// home, see secondHomes) while that one is below the session's limit, and
// goes back when its first choice has room for its whole weight below the
// limit: it does not go back and forth between the two at every call, which
// would cost it the providers' prompt caches on both.
func (r *Route) chooseBounded(keyHash uint64, ex affinity.Set) int {
	first := r.ring.PickHash(keyHash, ex)
	if first < 0 || r.balance == 0 {
		return first
	}
	total, n := r.inFlight(ex)
	bound := boundOf(total, n, r.balance)
	weight := r.shares.add(keyHash) * float64(total)
	limit := sessionLimit(keyHash, weight, total, n, bound)
	if j := r.homes.get(keyHash); j >= 0 && j < len(r.deps) && j != first && !ex.Has(j) {
		if float64(r.load(first))+weight < limit {
			r.homes.set(keyHash, -1)
			return first
		}
		if float64(r.load(j)) < limit {
			return j
		}
	}
	i := r.walk(keyHash, ex, first, limit)
	if i < 0 {
		i = r.walk(keyHash, ex, first, float64(bound))
	}
	if i < 0 {
		i = first // loads moved under the walk: none was below the bound
	}
	if i != first {
		r.homes.set(keyHash, i)
	} else {
		r.homes.set(keyHash, -1)
	}
	return i
}

// sessionLimit is the calls in flight at which a session of the given weight
// leaves a deployment: the bound lowered by the session's weight (the calls
// it holds, estimated as its share of the recent keyed picks times the total
// calls in flight), never by more than the room between the average and the
// bound, and by between half and all of that as the session hash says. A
// light session weighs a fraction of a call, so its limit is the bound
// itself; heavy sessions of equal weight homed on one deployment reach
// their limits one after another, rather than all at once.
func sessionLimit(keyHash uint64, weight float64, total int64, n int, bound int64) float64 {
	room := float64(bound) - float64(total+1)/float64(n)
	spread := 0.5 + float64(keyHash>>42)/(1<<23) // [0.5, 1), from bits no cell index uses
	return float64(bound) - min(weight, room)*spread
}

// walk returns the first deployment not in ex, in the session's order on the
// ring from first, whose calls in flight are below limit; -1 if none is.
func (r *Route) walk(keyHash uint64, ex affinity.Set, first int, limit float64) int {
	for i := first; i >= 0; i = r.ring.PickHash(keyHash, ex) {
		if float64(r.load(i)) < limit {
			return i
		}
		ex = ex.With(i)
	}
	return -1
}

// bound is the calls in flight a deployment not in ex may have before it
// takes one more: ceil((total + 1) × balance / n), total being the calls in
// flight on the n deployments not in ex, and the 1 the new call. Some
// deployment is always below it, since the least loaded has at most the
// average.
func (r *Route) bound(ex affinity.Set) int64 {
	total, n := r.inFlight(ex)
	return boundOf(total, n, r.balance)
}

// boundOf is bound for total calls in flight on n deployments.
func boundOf(total int64, n int, balance float64) int64 {
	return int64(math.Ceil(float64(total+1) * balance / float64(n)))
}

// inFlight returns the calls in flight on the deployments not in ex, and how
// many those are.
func (r *Route) inFlight(ex affinity.Set) (total int64, n int) {
	for i := range r.deps {
		if !ex.Has(i) {
			total += max(r.load(i), 0)
			n++
		}
	}
	return total, n
}
