package wire

import "unsafe"

// b2s converts b to a string without copying. The string is valid only while b
// is unchanged.
func b2s(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
