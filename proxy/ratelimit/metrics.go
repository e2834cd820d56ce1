package ratelimit

import (
	"io"
	"slices"
	"strconv"

	"github.com/modelgate/gateway/proxy/promtext"
)

// WritePrometheus writes the limits in force and their use, in the
// Prometheus text format: per key and model ("" for the key's limits over
// every model) and kind. Labels come from the config, a bounded set.
//
//	gateway_ratelimit_limit{key,model,kind}              gauge: requests or tokens per minute, concurrent calls
//	gateway_ratelimit_used{key,model,kind}               gauge: requests and tokens owed to the bucket, calls in flight
//	gateway_ratelimit_rejections_total{key,model,kind}   counter: calls refused
//	gateway_ratelimit_backend_failures_total{outcome}    counter: decisions made without Redis, admitted (open) or refused (closed)
//	gateway_ratelimit_backend_calls_total                counter: round trips to Redis (with Redis only)
//
// With Redis, "used" is the shared bucket as this node last saw it.
func (l *Limiter) WritePrometheus(w io.Writer) {
	bs := l.inForce()
	now := l.now().UnixMilli()
	b := make([]byte, 0, 256+400*len(bs))
	b = promtext.AppendMetadata(b, "gateway_ratelimit_limit", "gauge", "the key's limit per minute (requests, tokens) or at once (concurrent); model=\"\" is over every model")
	for _, x := range bs {
		for k, v := range [...]int64{x.rpm.Load(), x.tpm.Load(), x.conc.Load()} {
			if v > 0 {
				b = appendSample(b, "gateway_ratelimit_limit", x, Kind(k+1), v)
			}
		}
	}
	b = promtext.AppendMetadata(b, "gateway_ratelimit_used", "gauge", "requests and tokens the key's bucket holds against its limit (a full bucket is at the limit), calls in flight")
	for _, x := range bs {
		req, tok := x.used(now)
		for k, v := range [...]int64{req, tok, x.inflight.Load()} {
			if [...]int64{x.rpm.Load(), x.tpm.Load(), x.conc.Load()}[k] > 0 {
				b = appendSample(b, "gateway_ratelimit_used", x, Kind(k+1), v)
			}
		}
	}
	b = promtext.AppendMetadata(b, "gateway_ratelimit_rejections_total", "counter", "calls refused by the key's limits, by kind")
	for _, x := range bs {
		for k := KindRequests; k < numKinds; k++ {
			if n := x.rejected[k].Load(); n > 0 {
				b = appendSample(b, "gateway_ratelimit_rejections_total", x, k, int64(n))
			}
		}
	}
	b = promtext.AppendMetadata(b, "gateway_ratelimit_backend_failures_total", "counter", "rate-limit decisions made without the shared counters, by outcome of the fail mode")
	b = append(b, `gateway_ratelimit_backend_failures_total{outcome="open"} `...)
	b = strconv.AppendUint(b, l.failures[0].Load(), 10)
	b = append(b, "\ngateway_ratelimit_backend_failures_total{outcome=\"closed\"} "...)
	b = strconv.AppendUint(b, l.failures[1].Load(), 10)
	b = append(b, '\n')
	if l.remote != nil {
		b = promtext.AppendMetadata(b, "gateway_ratelimit_backend_calls_total", "counter", "round trips to Redis for rate-limit decisions and settlements")
		b = append(b, "gateway_ratelimit_backend_calls_total "...)
		b = strconv.AppendUint(b, l.calls.Load(), 10)
		b = append(b, '\n')
	}
	w.Write(b)
}

// BackendFailures returns the decisions made without the shared counters:
// admitted by fail open, refused by fail closed.
func (l *Limiter) BackendFailures() (open, closed uint64) {
	return l.failures[0].Load(), l.failures[1].Load()
}

// inForce returns the buckets of the limits in force, by key and model.
func (l *Limiter) inForce() []*bucket {
	t := l.table.Load()
	var bs []*bucket
	for _, kb := range t.keys {
		if kb.all != nil {
			bs = append(bs, kb.all)
		}
		for _, b := range kb.models {
			bs = append(bs, b)
		}
	}
	slices.SortFunc(bs, func(a, b *bucket) int {
		if a.key != b.key {
			return cmpString(a.key, b.key)
		}
		return cmpString(a.model, b.model)
	})
	return bs
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// used returns the requests and tokens the bucket holds at now (ms),
// rounded up.
func (b *bucket) used(now int64) (req, tok int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remoteless() {
		b.refill(now)
		return (b.reqDebt + window - 1) / window, (b.tokDebt + window - 1) / window
	}
	r := drain(b.reqDebt, b.lim.RequestsPerMinute, now-b.at)
	t := drain(b.tokDebt, b.lim.TokensPerMinute, now-b.at)
	return (r + window - 1) / window, (t + window - 1) / window
}

// remoteless reports whether the bucket is kept in memory only.
func (b *bucket) remoteless() bool { return b.redisKey == "" }

func appendSample(b []byte, name string, x *bucket, k Kind, v int64) []byte {
	b = append(b, name...)
	b = append(b, "{key="...)
	b = promtext.AppendLabelValue(b, x.key)
	b = append(b, ",model="...)
	b = promtext.AppendLabelValue(b, x.model)
	b = append(b, `,kind="`...)
	b = append(b, k.String()...)
	b = append(b, `"} `...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}
