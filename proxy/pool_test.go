package proxy

import (
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
)

// A deployment's pool hands out the connection released last: after a burst,
// calls made one at a time go over one connection, so the others go idle and
// are closed by the idle timeout, and the one in use is the one least likely
// to have been closed by the upstream. (Handing out the oldest, fasthttp's
// default, also shifts the whole idle list on every call.)
func TestUpstreamPoolReusesTheLastConnection(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string // the gateway's address of each call, as the upstream sees it
	)
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	h := newHotBenchUpstream(t, Options{}, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		seen = append(seen, ctx.RemoteAddr().String())
		n := len(seen)
		mu.Unlock()
		if n <= 2 { // the burst: both wait until both have arrived
			arrived <- struct{}{}
			<-release
		}
		hotUpstream(ctx)
	})
	call := func() error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		hotRequest(req, hotBody)
		if err := h.client.Do(req, resp); err != nil {
			return err
		}
		if resp.StatusCode() != 200 {
			t.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
		}
		return nil
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- call() }()
	}
	<-arrived
	<-arrived
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
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
	const burst = 500
	var arrivedN sync.WaitGroup
	arrivedN.Add(burst)
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	h := newHotBenchUpstream(b, Options{}, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= burst {
			arrivedN.Done()
			<-release
		}
		hotUpstream(ctx)
	})
	h.client.MaxConns = 2 * burst
	errs := make(chan error, burst)
	for range burst {
		go func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			hotRequest(req, hotBody)
			errs <- h.client.Do(req, resp)
		}()
	}
	arrivedN.Wait()
	close(release)
	for range burst {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
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
