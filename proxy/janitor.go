package proxy

import (
	"sync"
	"time"
)

// janitorInterval is how often expired files and old ownership records are
// reclaimed.
const janitorInterval = time.Minute

// StartJanitor reclaims expired files and Responses records older than the
// retention, once at start and then every minute, until the returned func is
// called. It does nothing without a store.
func (g *Gateway) StartJanitor() (stop func()) {
	if g.opts.Store == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(janitorInterval)
		defer t.Stop()
		for {
			g.reclaim()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (g *Gateway) reclaim() {
	st := g.opts.Store
	now := g.now()
	if n, err := st.ReclaimExpired(now); err != nil {
		g.log.Error("cannot reclaim expired files", "err", err)
	} else if n > 0 {
		g.log.Info("reclaimed expired files", "count", n)
	}
	retention := g.state.Load().cfg.Responses.Retention.D()
	if n, err := st.ReclaimResponses(now.Add(-retention)); err != nil {
		g.log.Error("cannot reclaim response records", "err", err)
	} else if n > 0 {
		g.log.Info("reclaimed response records", "count", n)
	}
}
