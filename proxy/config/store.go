package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/modelgate/gateway/store"
)

// store checks the store section: the engine, and the fields of that engine only.
func (p *problems) store(s *Store) {
	switch s.Engine {
	case "pebble":
		if _, ok := store.ParseDurability(s.Durability); !ok {
			p.add("store.durability", "must be process or machine, not %q", s.Durability)
		}
		for _, f := range s.redisFieldsSet() {
			p.add("store."+f, "only for engine redis")
		}
	case "redis":
		if s.Path != "" {
			p.add("store.path", "only for engine pebble: the redis engine keeps nothing on this machine")
		}
		if s.Durability != "" {
			p.add("store.durability", "only for engine pebble: with redis, replicas says what a write survives")
		}
		p.redis(s)
	default:
		p.add("store.engine", "unsupported engine %q (supported: pebble, redis)", s.Engine)
	}
	if s.Blobs != nil {
		p.blobs(s.Blobs)
	}
}

// redisFieldsSet names the Redis fields that are set.
func (s *Store) redisFieldsSet() []string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"addrs", len(s.Addrs) > 0}, {"username", s.Username != ""}, {"password", s.Password != ""},
		{"password_env", s.PasswordEnv != ""}, {"tls", s.TLS != nil}, {"key_prefix", s.KeyPrefix != ""},
		{"replicas", s.Replicas != nil}, {"wait_timeout", s.WaitTimeout != 0}, {"dial_timeout", s.DialTimeout != 0},
		{"command_timeout", s.CommandTimeout != 0}, {"chunk_size", s.ChunkSize != 0}, {"upload_ttl", s.UploadTTL != 0},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	return set
}

// redis checks the fields of the redis engine. No message quotes the password.
func (p *problems) redis(s *Store) {
	if len(s.Addrs) == 0 {
		p.add("store.addrs", "required for engine redis: host:port of one or more cluster nodes")
	}
	for i, a := range s.Addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			p.add(fmt.Sprintf("store.addrs[%d]", i), "expected host:port such as 10.0.0.11:6379, not %q", a)
		}
	}
	if strings.ContainsAny(s.KeyPrefix, "{}") {
		p.add("store.key_prefix", "must not hold { or }, which would change the keys' hash slots")
	}
	if r := s.Replicas; r != nil && (*r < 0 || *r > store.MaxRedisReplicas) {
		p.add("store.replicas", "must be between 0 and %d", store.MaxRedisReplicas)
	}
	if s.ChunkSize < store.MinChunkSize || s.ChunkSize > store.MaxChunkSize {
		p.add("store.chunk_size", "must be between %d and %d", store.MinChunkSize, store.MaxChunkSize)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"wait_timeout", s.WaitTimeout}, {"dial_timeout", s.DialTimeout}, {"command_timeout", s.CommandTimeout}, {"upload_ttl", s.UploadTTL}} {
		if d.v.D() < 1e6 {
			p.add("store."+d.name, "must be at least 1ms")
		}
	}
	if s.Password != "" && s.PasswordEnv != "" {
		p.add("store.password", "password and password_env are mutually exclusive")
	}
	if s.TLS != nil {
		if _, err := s.TLS.Config(); err != nil {
			p.add("store.tls", "%v", err)
		}
	}
}

// resolvePassword reads the password named by PasswordEnv, and the object storage keys,
// before validation.
func (p *problems) resolvePassword(s *Store, lookup func(string) (string, bool)) {
	if s.Blobs != nil {
		p.resolveBlobKeys(s.Blobs, lookup)
	}
	if s.PasswordEnv == "" || s.Password != "" {
		return
	}
	v, ok := lookup(s.PasswordEnv)
	if !ok || v == "" {
		p.add("store.password_env", "environment variable %s is not set", s.PasswordEnv)
		return
	}
	s.Password = v
	s.PasswordEnv = "" // resolved: the mutual exclusion concerns what the file says
}

// Config builds the TLS configuration of t; it reads the files it names.
func (t *StoreTLS) Config() (*tls.Config, error) {
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: no PEM certificate in %s", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("cert_file and key_file go together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file, key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// RedisOptions returns the options of the redis engine for s, which passed validation.
// retention is the config's responses.retention, the native TTL of an ownership record.
func (s *Store) RedisOptions(retention Duration) (store.RedisOptions, error) {
	o := store.RedisOptions{
		Addrs: s.Addrs, Username: s.Username, Password: s.Password, KeyPrefix: s.KeyPrefix,
		WaitTimeout: s.WaitTimeout.D(), DialTimeout: s.DialTimeout.D(),
		CommandTimeout: s.CommandTimeout.D(), ResponseTTL: retention.D(), ChunkSize: s.ChunkSize,
		UploadTTL: s.UploadTTL.D(),
	}
	if s.Replicas != nil {
		o.Replicas = *s.Replicas
	}
	if s.TLS != nil {
		c, err := s.TLS.Config()
		if err != nil {
			return o, fmt.Errorf("store.tls: %w", err)
		}
		o.TLS = c
	}
	return o, nil
}
