package sim

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// idGen makes unique hex ids from a seed and a counter: cheap, and deterministic for
// a fixed seed and call order (the golden tests rely on that). Safe for concurrent use.
type idGen struct {
	seed uint64
	n    atomic.Uint64
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// next returns the next pseudo-random 64-bit value (splitmix64).
func (g *idGen) next() uint64 {
	z := g.seed + g.n.Add(1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// appendHex appends prefix and nhex lowercase hex digits.
func (g *idGen) appendHex(dst []byte, prefix string, nhex int) []byte {
	dst = append(dst, prefix...)
	for nhex > 0 {
		v := g.next()
		for i := 0; i < 16 && nhex > 0; i++ {
			dst = append(dst, hexDigits[v&0xf])
			v >>= 4
			nhex--
		}
	}
	return dst
}

// timeID returns prefix, the 8 hex digits of the Unix second unix, and nhex-8 more: the
// shape of OpenAI's response and message ids, whose first 8 digits are the creation
// second ("resp_67ccd2be..." was created at 1741476542). So ids made later sort later,
// as a store indexed by id sees them from the real API.
func (g *idGen) timeID(prefix string, unix int64, nhex int) string {
	var buf [80]byte
	b := append(buf[:0], prefix...)
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[uint32(unix)>>shift&0xf])
	}
	return string(g.appendHex(b, "", nhex-8))
}

// id returns prefix followed by nhex hex digits.
func (g *idGen) id(prefix string, nhex int) string {
	var buf [80]byte
	return string(g.appendHex(buf[:0], prefix, nhex))
}
