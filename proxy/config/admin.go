package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Admin is the admin API's section: who may manage the callers' keys (docs/keys.md).
type Admin struct {
	// Tokens are the admin tokens, each with an id named in the audit log. None turns
	// the admin API off (it answers 404).
	Tokens []AdminToken `yaml:"tokens"`
	// RequireToken makes /status and /metrics answer only a request with an admin token.
	RequireToken bool `yaml:"require_token"`
}

// AdminToken is one admin token: the token itself, or its SHA-256 as for caller keys.
type AdminToken struct {
	ID     string `yaml:"id"`
	Key    string `yaml:"key"`
	SHA256 string `yaml:"sha256"`
}

// Digest returns the SHA-256 of the token.
func (t AdminToken) Digest() [sha256.Size]byte {
	if t.Key != "" {
		return sha256.Sum256([]byte(t.Key))
	}
	var d [sha256.Size]byte
	hex.Decode(d[:], []byte(t.SHA256)) // validated with the config
	return d
}

// Bounds of the rate limits, for the admin API's validation of a key's limits.
const (
	MaxRequestsPerMinute = maxRequestsPerMinute
	MaxTokensPerMinute   = maxTokensPerMinute
	MaxConcurrent        = maxConcurrent
)

// admin checks the admin tokens: ids, one form of the token each, and none that is also
// a caller's key.
func (p *problems) admin(c *Config) {
	callers := map[[sha256.Size]byte]bool{}
	for _, k := range c.Keys {
		callers[AdminToken{Key: k.Key, SHA256: k.SHA256}.Digest()] = true
	}
	ids := map[string]bool{}
	for i, t := range c.Admin.Tokens {
		f := fmt.Sprintf("admin.tokens[%d]", i)
		switch {
		case t.ID == "":
			p.add(f+".id", "required")
		case strings.ContainsAny(t.ID, "\x00\n\r"):
			p.add(f+".id", "must not contain NUL or a line break")
		case ids[t.ID]:
			p.add(f+".id", "duplicate id %q", t.ID)
		}
		ids[t.ID] = true
		switch {
		case t.Key == "" && t.SHA256 == "":
			p.add(f, "one of key or sha256 is required")
			continue
		case t.Key != "" && t.SHA256 != "":
			p.add(f, "key and sha256 are mutually exclusive")
			continue
		case t.SHA256 != "":
			if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != 32 {
				p.add(f+".sha256", "must be 64 hex digits")
				continue
			}
		case len(t.Key) < 16:
			p.add(f+".key", "must be at least 16 characters")
		}
		if callers[t.Digest()] {
			p.add(f, "is also a caller's key in keys: an admin token must be a secret of its own")
		}
	}
	if c.Admin.RequireToken && len(c.Admin.Tokens) == 0 {
		p.add("admin.require_token", "needs at least one admin token in admin.tokens")
	}
}
