package proxy

import (
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
)

// burstUpstream is an upstream whose first n calls wait until all n have
// arrived, so that the gateway opens n connections to it; with record set it
// keeps the gateway's address of every call, as it sees it.
type burstUpstream struct {
	n       int
	record  bool
	arrived sync.WaitGroup
	release chan struct{}
	mu      sync.Mutex
	calls   int
	seen    []string
}

func newBurstUpstream(n int, record bool) *burstUpstream {
	b := &burstUpstream{n: n, record: record, release: make(chan struct{})}
	b.arrived.Add(n)
	return b
}

func (b *burstUpstream) handle(ctx *fasthttp.RequestCtx) {
	b.mu.Lock()
	b.calls++
	n := b.calls
	if b.record {
		b.seen = append(b.seen, ctx.RemoteAddr().String())
	}
	b.mu.Unlock()
	if n <= b.n {
		b.arrived.Done()
		<-b.release
	}
	hotUpstream(ctx)
}

// send makes the burst's n calls through h at once, and returns once all of
// them are answered.
func (b *burstUpstream) send(tb testing.TB, h *hotBench) {
	tb.Helper()
	errs := make(chan error, b.n)
	for range b.n {
		go func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			hotRequest(req, hotBody)
			err := h.client.Do(req, resp)
			if err == nil && resp.StatusCode() != 200 {
				tb.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
			}
			errs <- err
		}()
	}
	b.arrived.Wait()
	close(b.release)
	for range b.n {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
}

// A deployment's pool hands out the connection released last: after a burst,
// calls made one at a time go over one connection, so the others go idle and
// are closed by the idle timeout, and the one in use is the one least likely
// to have been closed by the upstream. (Handing out the oldest, fasthttp's
// default, also shifts the whole idle list on every call.)
func TestUpstreamPoolReusesTheLastConnection(t *testing.T) {
	up := newBurstUpstream(2, true)
	h := newHotBenchUpstream(t, Options{}, up.handle)
	up.send(t, h)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hotRequest(req, hotBody)
	for range 6 {
		h.do(t, req, resp)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	seen := up.seen
	if seen[0] == seen[1] {
		t.Fatalf("the burst went over one connection: %q", seen)
	}
	for _, a := range seen[3:] {
		if a != seen[2] {
			t.Fatalf("calls in sequence went over more than one connection: %q", seen[2:])
		}
	}
}

// BenchmarkProxiedRequestAfterBurst is a call made one at a time after a
// burst of 500 calls at once left 500 connections to the deployment idle:
// what handing one out costs with that many in the pool.
func BenchmarkProxiedRequestAfterBurst(b *testing.B) {
	up := newBurstUpstream(500, false)
	h := newHotBenchUpstream(b, Options{}, up.handle)
	h.client.MaxConns = 2 * up.n
	up.send(b, h)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hotRequest(req, hotBody)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.do(b, req, resp)
	}
}
