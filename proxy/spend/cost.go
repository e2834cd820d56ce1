package spend

import "github.com/modelgate/gateway/proxy/config"

// Prices are what a model's calls cost, in pico-USD per token (Image: per
// image). The zero value prices nothing.
type Prices struct {
	Input, Output, CachedInput, CacheWrite, Reasoning, Image int64
}

// perToken is the number of tokens a config price is for.
const perToken = 1_000_000

// PricesOf converts a config's prices (USD per million tokens, validated to
// be whole pico-USD per token) to Prices; reasoning is billed as output
// when it has no price of its own. nil is the zero Prices.
func PricesOf(p *config.Pricing) Prices {
	if p == nil {
		return Prices{}
	}
	pr := Prices{
		Input:       int64(p.Input) / perToken,
		Output:      int64(p.Output) / perToken,
		CachedInput: int64(p.CachedInput) / perToken,
		CacheWrite:  int64(p.CacheWrite) / perToken,
		Reasoning:   int64(p.Output) / perToken,
		Image:       int64(p.Image),
	}
	if p.Reasoning != nil {
		pr.Reasoning = int64(*p.Reasoning) / perToken
	}
	return pr
}

// Zero reports whether p prices nothing.
func (p *Prices) Zero() bool { return *p == Prices{} }

// Usage is what a call used, in the provider's counts.
type Usage struct {
	Input, Output, Cached, CacheWrite, Reasoning, Images int64
}

// Shape says how a family's counts nest: whether the input count includes
// the cached tokens (beta, gamma) or not (alpha, whose cache reads and
// writes are counted apart), and whether the output count includes the
// reasoning tokens (beta) or not (gamma's thoughts).
type Shape struct {
	CachedInInput, ReasoningInOutput bool
}

// maxCount bounds each count priced: a billion tokens, far beyond a call's,
// so that no sum of products overflows (6 × 1e9 × 1e9 pico-USD).
const maxCount = 1_000_000_000

// Cost returns what u costs at prices p, counted as shape s says, in
// pico-USD: uncached input, cached input, cache writes, output beside
// reasoning, reasoning, and images, each times its price.
func (p *Prices) Cost(u *Usage, s Shape) int64 {
	in, out := clampCount(u.Input), clampCount(u.Output)
	cached, reasoning := clampCount(u.Cached), clampCount(u.Reasoning)
	if s.CachedInInput {
		in = max(0, in-cached)
	}
	if s.ReasoningInOutput {
		out = max(0, out-reasoning)
	}
	return in*p.Input + cached*p.CachedInput + clampCount(u.CacheWrite)*p.CacheWrite +
		out*p.Output + reasoning*p.Reasoning + clampCount(u.Images)*p.Image
}

func clampCount(n int64) int64 { return min(max(n, 0), maxCount) }
