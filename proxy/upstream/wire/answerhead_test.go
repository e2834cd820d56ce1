package wire

import (
	"encoding/binary"
	"testing"
)

// plainValueBytes takes 8 bytes at once exactly when each of them is a value
// byte other than a tab: every byte value, in every position, among others
// that are.
func TestPlainValueBytes(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			want := validHeaderValue[c] == 1 && c != '\t'
			if got := plainValueBytes(binary.LittleEndian.Uint64(b)); got != want {
				t.Fatalf("byte %#x at %d: %v, want %v", c, pos, got, want)
			}
		}
	}
}
