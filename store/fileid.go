package store

import (
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// FileIDPrefix starts every file id.
const FileIDPrefix = "file_svc_"

// FileIDLen is the length of a file id: the prefix and a 26-character ULID.
const FileIDLen = len(FileIDPrefix) + ulid.EncodedSize

// idGen makes ULIDs that strictly increase within the process: the millisecond never goes
// back, even when the caller's clock does, and ids of one millisecond differ by a random
// increment of their crypto/rand entropy.
var idGen struct {
	mu      sync.Mutex
	lastMS  uint64
	entropy *ulid.MonotonicEntropy
}

// NewFileID returns a new file id whose ULID carries the millisecond of t (or of the previous
// id, when t is earlier). Ids are time-ordered, strictly increasing within the process, and
// unique across restarts and gateway nodes through 80 bits of crypto/rand entropy.
// It is safe for concurrent use.
func NewFileID(t time.Time) string {
	id := nextULID(timestampMS(t))
	var buf [FileIDLen]byte
	copy(buf[:], FileIDPrefix)
	if err := id.MarshalTextTo(buf[len(FileIDPrefix):]); err != nil {
		panic("BUG: cannot encode ULID: " + err.Error())
	}
	return string(buf[:])
}

func nextULID(ms uint64) ulid.ULID {
	idGen.mu.Lock()
	defer idGen.mu.Unlock()
	if idGen.entropy == nil {
		idGen.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	ms = max(ms, idGen.lastMS)
	for {
		id, err := ulid.New(ms, idGen.entropy)
		if err == nil {
			idGen.lastMS = ms
			return id
		}
		if !errors.Is(err, ulid.ErrMonotonicOverflow) || ms >= ulid.MaxTime() {
			panic("BUG: cannot make ULID: " + err.Error())
		}
		// The entropy of this millisecond is used up: move on to the next one.
		ms++
	}
}

// timestampMS clamps t to the millisecond range a ULID can carry.
func timestampMS(t time.Time) uint64 {
	ms := t.UnixMilli()
	switch {
	case ms < 0:
		return 0
	case uint64(ms) > ulid.MaxTime():
		return ulid.MaxTime()
	}
	return uint64(ms)
}

// ValidFileID reports whether s is FileIDPrefix followed by 26 characters of the upper-case
// Crockford base32 alphabet (0-9 A-H J K M N P-T V-Z), the first one 0-7 (a 48-bit time).
func ValidFileID(s string) bool {
	if len(s) != FileIDLen || s[:len(FileIDPrefix)] != FileIDPrefix {
		return false
	}
	u := s[len(FileIDPrefix):]
	if u[0] > '7' {
		return false
	}
	for i := 0; i < len(u); i++ {
		if !crockford[u[i]] {
			return false
		}
	}
	return true
}

// crockford marks the bytes of the upper-case Crockford base32 alphabet.
var crockford = func() (t [256]bool) {
	for i := 0; i < len(ulid.Encoding); i++ {
		t[ulid.Encoding[i]] = true
	}
	return t
}()
