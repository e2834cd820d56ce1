package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/promtext"
)

// Token usage per key id and model: what providers report in their answers
// (read by the relay, see parse.UsageScanner) is counted in
// gateway_tokens_total{key,model,kind} and written in the access log.

// The kinds of tokens counted, as the kind label names them.
const (
	kindInput = iota
	kindOutput
	kindCached
	kindReasoning
	numKinds
)

var kindNames = [numKinds]string{"input", "output", "cached", "reasoning"}

type tokenCounters [numKinds]*metrics.Counter

// tokenStats holds one model's token counters per key id. Key ids are the
// config's, a bounded set, so the map only grows while new ones are first
// seen; lookups read an immutable map without locking or allocating. The
// zero value is ready; safe for concurrent use.
type tokenStats struct {
	m  atomic.Pointer[map[string]*tokenCounters]
	mu sync.Mutex
}

// countTokens adds u to the counters of keyID and model modelID.
func (o *observer) countTokens(ts *tokenStats, modelID, keyID string, u *parse.Usage) {
	tc := o.tokenCounters(ts, modelID, keyID)
	for k, n := range [numKinds]int64{u.Input, u.Output, u.Cached, u.Reasoning} {
		if n > 0 {
			tc[k].AddInt64(n)
		}
	}
}

func (o *observer) tokenCounters(ts *tokenStats, modelID, keyID string) *tokenCounters {
	if m := ts.m.Load(); m != nil {
		if tc := (*m)[keyID]; tc != nil {
			return tc
		}
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	old := ts.m.Load()
	if old != nil && (*old)[keyID] != nil {
		return (*old)[keyID]
	}
	tc := new(tokenCounters)
	for k := range tc {
		name := `gateway_tokens_total{key=` + string(promtext.AppendLabelValue(nil, keyID)) +
			`,model=` + string(promtext.AppendLabelValue(nil, modelID)) + `,kind="` + kindNames[k] + `"}`
		tc[k] = o.set.GetOrCreateCounter(name)
	}
	next := make(map[string]*tokenCounters, 8)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[keyID] = tc
	ts.m.Store(&next)
	return tc
}

// addUsageAttrs adds the access line's token counts, when the answer
// reported any.
func addUsageAttrs(ln *accesslog.Line, u parse.Usage) {
	if !u.Found {
		return
	}
	ln.Int("input_tokens", u.Input)
	ln.Int("output_tokens", u.Output)
	ln.Int("cached_tokens", u.Cached)
	ln.Int("reasoning_tokens", u.Reasoning)
}
