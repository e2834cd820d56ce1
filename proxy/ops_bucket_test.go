package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/store"
)

// blobReadyz reads e.gw's /readyz in process.
func blobReadyz(t *testing.T, e *testEnv) (int, readinessReport, string) {
	t.Helper()
	resp := serveInProcess(e, "GET", "/readyz", "", "", nil)
	var r readinessReport
	if err := json.Unmarshal(resp.Body(), &r); err != nil {
		t.Fatalf("/readyz: %d %q: %v", resp.StatusCode(), resp.Body(), err)
	}
	return resp.StatusCode(), r, string(resp.Body())
}

// TestReadyzObjectStorage stops and starts the real S3 server: /readyz reports the bucket
// ok, then unavailable with the reason in words (no address), then ok again, and stays 200
// and ready throughout, while chat keeps serving. Without store.blobs it says nothing of
// object storage.
func TestReadyzObjectStorage(t *testing.T) {
	plain := newEnv(t, nil)
	if status, body := plain.readyz(); status != 200 || strings.Contains(body, "object_storage") {
		t.Fatalf("/readyz without store.blobs: %d %s", status, body)
	}
	e, _ := newBlobEnv(t)
	f := func(want, reason string) {
		t.Helper()
		// The answer is cached for bucketProbeTTL: ask until it changes, for at most 30 s.
		var last string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, r, body := blobReadyz(t, e)
			last = body
			if status != 200 || !r.Ready || r.Store != "open" {
				t.Fatalf("/readyz with object storage %s: %d %s", want, status, body)
			}
			if r.ObjectStorage == want && strings.Contains(r.ObjectStorageReason, reason) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz does not say object_storage %s (%q) in 30 s: %s", want, reason, body)
			}
		}
		if reason == "" && strings.Contains(last, "object_storage_reason") {
			t.Fatalf("a reason while ok: %s", last)
		}
		if strings.Contains(last, "7412") || strings.Contains(last, "127.0.0.1") {
			t.Fatalf("/readyz names the object storage's address: %s", last)
		}
		if resp := serveInProcess(e, "POST", "/v1/router/beta/v1/chat/completions", "", "application/json",
			[]byte(chatBody(""))); resp.StatusCode() != 200 {
			t.Fatalf("chat with object storage %s: %d %s", want, resp.StatusCode(), resp.Body())
		}
	}
	f("ok", "")
	blobServer.Kill(t)
	restarted := false
	defer func() {
		if !restarted {
			blobServer.Restart(t)
		}
	}()
	f("unavailable", "object storage refused the connection")
	blobServer.Restart(t)
	restarted = true
	f("ok", "")
}

// countingChecker answers CheckBucket with err and counts the calls.
type countingChecker struct {
	calls atomic.Int64
	err   error
}

func (c *countingChecker) CheckBucket(context.Context) error {
	c.calls.Add(1)
	return c.err
}

// A storm of probes asks the object storage once per bucketProbeTTL, and every probe of it
// gets that one answer.
func TestBucketProbeAsksOncePerTTL(t *testing.T) {
	var p bucketProbe
	c := &countingChecker{err: errors.New("store: unavailable: object storage did not answer in time")}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			// Some probes read the clock before the one that asks first.
			if err := p.check(c, t0.Add(time.Duration(i%3)*time.Millisecond)); err != c.err {
				t.Errorf("probe %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := c.calls.Load(); n != 1 {
		t.Fatalf("64 probes asked %d times, want 1", n)
	}
	c.err = nil
	if err := p.check(c, t0.Add(bucketProbeTTL-time.Millisecond)); err == nil || c.calls.Load() != 1 {
		t.Fatalf("within the TTL: %v, %d calls", err, c.calls.Load())
	}
	if err := p.check(c, t0.Add(bucketProbeTTL+2*time.Millisecond)); err != nil || c.calls.Load() != 2 {
		t.Fatalf("past the TTL: %v, %d calls", err, c.calls.Load())
	}
}

var _ bucketChecker = (*store.Blobs)(nil)
