package proxy

import (
	"context"
	"sync"
	"time"
)

// Readiness of the object storage that holds the file bytes (store.blobs). /readyz reports
// it as object_storage, ok or unavailable, with the reason in words, but it does not make
// the node unready: without the bucket only uploads and messages that reference a stored
// file fail (503 with Retry-After), while chat, messages, Responses, listings, metadata and
// deletes keep serving. Every node shares the one bucket, so taking nodes out of a load
// balancer would stop all of that and bring the bucket back no sooner.

// bucketChecker is a store whose file bytes are in object storage (store.Blobs).
type bucketChecker interface {
	CheckBucket(ctx context.Context) error
}

// bucketProbeTTL is how long one answer of the bucket check serves /readyz and /status.
const bucketProbeTTL = 2 * time.Second

// bucketProbe caches the answer of the bucket check: one HEAD of the bucket, bounded by
// checkTimeout, answers every probe of the next bucketProbeTTL, so that a storm of probes
// asks the service at most once per TTL. Probes that come while it asks wait for its
// answer. The zero value is ready; safe for concurrent use.
type bucketProbe struct {
	mu  sync.Mutex
	at  time.Time // when the cached answer was asked for; zero: none yet
	err error
}

// check returns c's answer as of now: the cached one unless it is bucketProbeTTL old.
func (p *bucketProbe) check(c bucketChecker, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && now.Sub(p.at) < bucketProbeTTL {
		return p.err // a probe that read the clock before the one that asked is served too
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	p.err, p.at = c.CheckBucket(ctx), now
	return p.err
}

// objectStorageReadiness returns the object storage's state for /readyz, ok or
// unavailable, and the reason when unavailable; "" when the store keeps the file bytes
// itself.
func (g *Gateway) objectStorageReadiness(now time.Time) (state, reason string) {
	s := g.obs.store
	if s == nil || s.closed.Load() {
		return "", ""
	}
	c, ok := s.s.(bucketChecker)
	if !ok {
		return "", ""
	}
	if err := s.bucket.check(c, now); err != nil {
		return "unavailable", err.Error()
	}
	return "ok", ""
}
