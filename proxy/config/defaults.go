package config

import (
	"time"

	"github.com/modelgate/gateway/store"
)

// EnsureDefaults fills every zero field that has a default.
func (c *Config) EnsureDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.TLS != nil {
		c.TLS.ensureDefaults()
	}
	if c.Store.Engine == "" {
		c.Store.Engine = "pebble"
	}
	c.Store.ensureDefaults()
	setDefault(&c.Timeouts.Connect, 5*time.Second)
	setDefault(&c.Timeouts.FirstByte, 10*time.Minute)
	setDefault(&c.Timeouts.Idle, 5*time.Minute)
	setDefault(&c.Timeouts.Write, time.Minute)
	setDefault(&c.Timeouts.ClientWriteIdle, time.Minute)
	setDefault(&c.Timeouts.IdleConn, 4*time.Second)
	if c.Health.Failures == 0 {
		c.Health.Failures = 3
	}
	setDefault(&c.Health.Cooldown, 10*time.Second)
	setDefault(&c.Routing.Decay, 10*time.Second)
	if c.Retry.Attempts == 0 {
		c.Retry.Attempts = 3
	}
	if c.Retry.BudgetPercent == 0 {
		c.Retry.BudgetPercent = 20
	}
	if c.Retry.BudgetMinPerSecond == 0 {
		c.Retry.BudgetMinPerSecond = 3
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = 32 << 20
	}
	if c.Limits.MaxImageBodyBytes == 0 {
		c.Limits.MaxImageBodyBytes = 64 << 20
	}
	if c.Limits.MaxBufferedBodyBytes == 0 {
		c.Limits.MaxBufferedBodyBytes = 256 << 20
	}
	if c.Limits.MaxResponseBytes == 0 {
		c.Limits.MaxResponseBytes = 64 << 20
	}
	if c.Limits.MaxHeldAnswerBytes == 0 {
		c.Limits.MaxHeldAnswerBytes = 64 << 10
	}
	setDefault(&c.Responses.Retention, 720*time.Hour)
	setDefault(&c.Files.DefaultExpiresIn, 720*time.Hour)
	setDefault(&c.RateLimit.Timeout, 250*time.Millisecond)
	c.Tracing.ensureDefaults()
	for i := range c.Upstreams {
		c.Upstreams[i].ensureDefaults()
	}
	for i := range c.Models {
		if c.Models[i].OwnedBy == "" {
			c.Models[i].OwnedBy = "system"
		}
	}
}

// ensureDefaults fills the upstream's zero fields that have a default.
func (u *Upstream) ensureDefaults() {
	if u.MaxConns == 0 {
		u.MaxConns = 512
	}
	if hc := &u.HealthCheck; hc.Path != "" {
		setDefault(&hc.Interval, 10*time.Second)
		setDefault(&hc.Timeout, 2*time.Second)
		if hc.Failures == 0 {
			hc.Failures = 2
		}
	}
	if u.Provider == "" {
		u.Provider = defaultProvider(u.Family)
	}
}

func setDefault(d *Duration, v time.Duration) {
	if *d == 0 {
		*d = Duration(v)
	}
}

// ensureDefaults fills the defaults of the engine s names, and only those: a field of the
// other engine stays empty, so that validation can refuse it.
func (s *Store) ensureDefaults() {
	if s.Engine != "redis" {
		if s.Path == "" {
			s.Path = "./data"
		}
		if s.Durability == "" {
			s.Durability = store.DurabilityProcess.String()
		}
		return
	}
	if s.Replicas == nil {
		one := 1
		s.Replicas = &one
	}
	setDefault(&s.WaitTimeout, store.DefaultRedisWaitTimeout)
	setDefault(&s.DialTimeout, store.DefaultRedisDialTimeout)
	setDefault(&s.CommandTimeout, store.DefaultRedisCommandTimeout)
	setDefault(&s.UploadTTL, store.DefaultRedisUploadTTL)
	if s.ChunkSize == 0 {
		s.ChunkSize = store.RedisChunkSize
	}
}
