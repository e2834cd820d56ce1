package store

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"
)

// Key layout of the Pebble engine. Owners hold no NUL byte and file ids have a fixed length,
// so every key below parses back without ambiguity.
//
//	r/<response id>                          → response record (appendResponse)
//	t/<created:8><response id>               → empty; age index for ReclaimResponses
//	f/<owner>\x00<file id>                   → file metadata (appendFileMeta)
//	d/<owner>\x00<file id><chunk index:4>    → file bytes, one chunk per key
//	x/<expires:8><owner>\x00<file id>        → empty; expiry index for ReclaimExpired
//
// Times in keys are sortableNanos, big-endian, so byte order is time order. File ids are
// ULIDs, so byte order of f/ keys within an owner is creation order: a listing is a prefix
// scan, forward for ascending and backward for descending. An owner's chunks and metadata
// sit under per-owner prefixes, so ids chosen by two owners never collide.
const (
	prefixResponse    = "r/"
	prefixResponseAge = "t/"
	prefixFileMeta    = "f/"
	prefixFileData    = "d/"
	prefixFileExpiry  = "x/"
)

const (
	timeKeyLen  = 8
	chunkIdxLen = 4
)

func appendResponseKey(dst []byte, id string) []byte {
	dst = append(dst, prefixResponse...)
	return append(dst, id...)
}

func appendResponseAgeKey(dst []byte, created time.Time, id string) []byte {
	dst = append(dst, prefixResponseAge...)
	dst = binary.BigEndian.AppendUint64(dst, sortableNanos(created))
	return append(dst, id...)
}

// parseResponseAgeKey splits a t/ key into its time and response id.
func parseResponseAgeKey(k []byte) (created uint64, id []byte, ok bool) {
	k, ok = bytes.CutPrefix(k, []byte(prefixResponseAge))
	if !ok || len(k) <= timeKeyLen {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(k), k[timeKeyLen:], true
}

// appendOwnerPrefix appends f/<owner>\x00: the prefix of every file key of owner.
func appendOwnerPrefix(dst []byte, owner string) []byte {
	dst = append(dst, prefixFileMeta...)
	dst = append(dst, owner...)
	return append(dst, 0)
}

func appendFileKey(dst []byte, owner, id string) []byte {
	return append(appendOwnerPrefix(dst, owner), id...)
}

// appendChunkPrefix appends d/<owner>\x00<file id>: the prefix of every chunk of one file.
func appendChunkPrefix(dst []byte, owner, id string) []byte {
	dst = append(dst, prefixFileData...)
	dst = append(dst, owner...)
	dst = append(dst, 0)
	return append(dst, id...)
}

// parseChunkKey splits a d/ key into the owner and file id it belongs to.
func parseChunkKey(k []byte) (owner, id []byte, ok bool) {
	k, ok = bytes.CutPrefix(k, []byte(prefixFileData))
	if !ok || len(k) < FileIDLen+chunkIdxLen+2 {
		return nil, nil, false
	}
	return splitOwnerID(k[:len(k)-chunkIdxLen])
}

func appendExpiryKey(dst []byte, expires time.Time, owner, id string) []byte {
	dst = append(dst, prefixFileExpiry...)
	dst = binary.BigEndian.AppendUint64(dst, sortableNanos(expires))
	dst = append(dst, owner...)
	dst = append(dst, 0)
	return append(dst, id...)
}

// parseExpiryKey splits an x/ key into its time, owner and file id.
func parseExpiryKey(k []byte) (expires uint64, owner, id []byte, ok bool) {
	k, ok = bytes.CutPrefix(k, []byte(prefixFileExpiry))
	if !ok || len(k) < timeKeyLen+FileIDLen+2 {
		return 0, nil, nil, false
	}
	owner, id, ok = splitOwnerID(k[timeKeyLen:])
	return binary.BigEndian.Uint64(k), owner, id, ok
}

// splitOwnerID splits <owner>\x00<file id>.
func splitOwnerID(b []byte) (owner, id []byte, ok bool) {
	n := len(b) - FileIDLen - 1
	if n < 1 || b[n] != 0 {
		return nil, nil, false
	}
	return b[:n], b[n+1:], true
}

// sortableNanos maps t to a uint64 whose big-endian bytes sort like the times: Unix
// nanoseconds with the sign bit flipped, clamped to the range an int64 can hold (about
// 1678..2262), so the zero time sorts first.
func sortableNanos(t time.Time) uint64 {
	var n int64
	switch {
	case t.Before(minNanosTime):
		n = math.MinInt64
	case t.After(maxNanosTime):
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return uint64(n) ^ (1 << 63)
}

var (
	minNanosTime = time.Unix(0, math.MinInt64)
	maxNanosTime = time.Unix(0, math.MaxInt64)
)

// prefixEnd returns the smallest key greater than every key that starts with prefix, or nil
// (no upper bound) when there is none. It does not modify prefix.
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
