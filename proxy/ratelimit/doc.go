// Package ratelimit owns the per-key rate limits of the gateway's callers:
// requests per minute, tokens per minute (input + output, charged from the
// usage each answer reports) and concurrent calls, per key and optionally
// per key and model; the decision to admit a call, the charge of its tokens
// when it ends, the counters behind them and their metrics.
//
// Requests and tokens are token buckets (GCRA: a debt that drains at the
// limit's rate; a minute's worth of the limit may be spent at once). On one
// node the buckets live in memory, one mutex per bucket. With a Redis
// Cluster (the store's client) the buckets live in Redis and every node
// spends local allowances that it reserves from them in one script call,
// made without holding the bucket's lock; a failed call puts only its key in
// the fail mode. Concurrency is counted per node. A call's usage is charged
// up to MaxCallTokens and debts saturate, so no report overflows them.
// docs/rate-limits.md says why, and what the numbers are.
//
// It does not own the configuration (proxy/config), the answers a refused
// call gets (proxy writes them in the family's shape) or the Redis client
// (store.Redis).
package ratelimit
