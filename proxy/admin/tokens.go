package admin

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/modelgate/gateway/proxy/config"
)

// Tokens are the admin tokens, held as their SHA-256 digests. The zero value holds none.
// Read-only once built; safe for concurrent use.
type Tokens struct {
	ids     []string
	digests [][sha256.Size]byte
}

// NewTokens holds the config's admin tokens.
func NewTokens(ts []config.AdminToken) *Tokens {
	t := &Tokens{}
	for _, at := range ts {
		t.ids = append(t.ids, at.ID)
		t.digests = append(t.digests, at.Digest())
	}
	return t
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.ids)
}

// Verify returns the id of the admin token presented as "Bearer <token>" in the
// Authorization value auth. Every token is compared, in constant time.
func (t *Tokens) Verify(auth []byte) (string, bool) {
	const prefix = "bearer "
	if t == nil || len(auth) <= len(prefix) || !bytes.EqualFold(auth[:len(prefix)], []byte(prefix)) {
		return "", false
	}
	d := sha256.Sum256(bytes.TrimSpace(auth[len(prefix):]))
	found := -1
	for i := range t.digests {
		if subtle.ConstantTimeCompare(t.digests[i][:], d[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.ids[found], true
}
