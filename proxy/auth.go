package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"github.com/modelgate/gateway/proxy/config"
)

// Verifier is the identity component: it maps a presented API key to the id of
// the caller that owns it. Implementations must be safe for concurrent use.
type Verifier interface {
	Verify(key []byte) (id string, ok bool)
}

// HashedKeys verifies keys against their SHA-256 digests. Keys themselves are
// never held. Safe for concurrent use once built; the zero value accepts nothing.
type HashedKeys struct {
	byDigest map[[sha256.Size]byte]keyEntry
}

type keyEntry struct {
	id     string
	digest [sha256.Size]byte
}

// NewHashedKeys builds a verifier from the configured keys.
func NewHashedKeys(keys []config.Key) *HashedKeys {
	h := &HashedKeys{byDigest: make(map[[sha256.Size]byte]keyEntry, len(keys))}
	for _, k := range keys {
		if k.Key == "" && k.SHA256 == "" {
			continue // a client certificate's alone (see certKeys)
		}
		var d [sha256.Size]byte
		if k.Key != "" {
			d = sha256.Sum256([]byte(k.Key))
		} else {
			hex.Decode(d[:], []byte(k.SHA256)) // validated by Config.Validate
		}
		h.byDigest[d] = keyEntry{id: k.ID, digest: d}
	}
	return h
}

// Verify hashes key and looks the digest up. The lookup is keyed by the digest,
// so its timing reveals nothing usable about any key; the final equality check
// is constant-time.
func (h *HashedKeys) Verify(key []byte) (string, bool) {
	if len(key) == 0 || h == nil {
		return "", false
	}
	d := sha256.Sum256(key)
	e, ok := h.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return "", false
	}
	return e.id, true
}

// HashKey returns the hex SHA-256 of key, the form the config's sha256 field takes.
func HashKey(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}
