package proxy

import "unsafe"

// b2s converts b to a string without copying. The string is valid only while b
// is unchanged.
func b2s(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// s2b converts s to a byte slice without copying. The slice must never be
// modified.
func s2b(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
