package keys

import (
	"strings"
	"unsafe"
)

// Models is the set of models a key may call: exact ids and '*' globs ('*' matches any
// run of characters, '/' included). The zero value allows nothing; a nil *Models allows
// every model. Read-only once built; safe for concurrent use.
type Models struct {
	exact map[string]struct{}
	globs [][]string // each glob split at its stars
}

// NewModels returns the set of patterns; nil patterns give nil (every model).
func NewModels(patterns []string) *Models {
	if patterns == nil {
		return nil
	}
	m := &Models{exact: make(map[string]struct{}, len(patterns))}
	for _, p := range patterns {
		if !strings.Contains(p, "*") {
			m.exact[p] = struct{}{}
			continue
		}
		m.globs = append(m.globs, strings.Split(p, "*"))
	}
	return m
}

// Allows reports whether model is in the set. It does not allocate.
func (m *Models) Allows(model []byte) bool {
	if m == nil {
		return true
	}
	if _, ok := m.exact[string(model)]; ok {
		return true
	}
	for _, g := range m.globs {
		if globMatch(g, model) {
			return true
		}
	}
	return false
}

// AllowsString is Allows of a string.
func (m *Models) AllowsString(model string) bool {
	return m.Allows([]byte(model))
}

// globMatch matches s against a glob split at its stars: parts[0] is a prefix, the last
// part a suffix, and those between appear in order.
func globMatch(parts []string, s []byte) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || string(s[:len(first)]) != first || string(s[len(s)-len(last):]) != last {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(b2s(s), p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// MatchesAny reports whether pattern matches at least one of ids.
func MatchesAny(pattern string, ids []string) bool {
	m := NewModels([]string{pattern})
	for _, id := range ids {
		if m.AllowsString(id) {
			return true
		}
	}
	return false
}

// b2s converts b to a string without copying; valid while b is unchanged.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
