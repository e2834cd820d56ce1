package upstream

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/modelgate/gateway/proxy/latency"
)

// Stats is what a deployment carries for metrics. The zero value is ready;
// safe for concurrent use. Picks and moves live with the deployment, so they
// restart from zero when a reload replaces it (Prometheus' rate() reads that
// as a counter reset).
type Stats struct {
	picks atomic.Uint64
	// moves counts the picks with a session key that did not go to the key's
	// first choice, because that one was excluded, had failed or was
	// at its bound of calls in flight.
	moves atomic.Uint64
	// attempts counts the calls sent (a call sent again counts again);
	// retries the calls that left the deployment (or went again to it) by
	// reason; exhausted the retries the budget refused.
	attempts  atomic.Uint64
	retries   [NumRetryReasons]atomic.Uint64
	exhausted atomic.Uint64
	// idleClosed counts the pooled connections found closed by the upstream
	// before a request was written on them (see wire.Observer).
	idleClosed atomic.Uint64
	// Meter holds the deployment's histograms and counters, set by the
	// gateway's metrics on first use; they live in the gateway's
	// registries by name and survive a reload.
	Meter atomic.Pointer[Meter]
}

// Meter is a deployment's metrics, held by name in the gateway's registries.
type Meter struct {
	Duration  *latency.Histogram
	FirstByte *latency.Histogram
	// Responses counts answers by status class: 0 for no status, 1..5 for
	// 1xx..5xx; each counter is created on first use.
	Responses [6]atomic.Pointer[metrics.Counter]
}

// picked records one pick of the deployment.
func (s *Stats) picked(moved bool) {
	s.picks.Add(1)
	if moved {
		s.moves.Add(1)
	}
}

// Picks returns how often the deployment was picked.
func (s *Stats) Picks() uint64 { return s.picks.Load() }

// StaleRetries returns how many calls were sent again, on a connection
// dialled for them, after a pooled one turned out closed by the upstream.
func (s *Stats) StaleRetries() uint64 { return s.retries[RetryStale].Load() }

// IdleClosed returns how many pooled connections were found closed by the
// upstream, or holding bytes no request asked for, before a request was
// written on them: each was closed and another taken, the call not sent
// again.
func (s *Stats) IdleClosed() uint64 { return s.idleClosed.Load() }

// Attempts returns how many calls were sent to the deployment.
func (s *Stats) Attempts() uint64 { return s.attempts.Load() }

// Retries returns how many calls left the deployment for reason.
func (s *Stats) Retries(reason RetryReason) uint64 { return s.retries[reason].Load() }

// Retried records a call that left the deployment for reason, or went to it
// again (RetryStale).
func (s *Stats) Retried(reason RetryReason) { s.retries[reason].Add(1) }

// Refused records a retry the budget refused.
func (s *Stats) Refused() { s.exhausted.Add(1) }

// BudgetExhausted returns how many retries the budget refused.
func (s *Stats) BudgetExhausted() uint64 { return s.exhausted.Load() }

// Moves returns how many of those picks moved a session off its first choice.
func (s *Stats) Moves() uint64 { return s.moves.Load() }
