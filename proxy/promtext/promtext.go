// Package promtext owns the small pieces of the Prometheus text exposition
// format that the gateway's metrics writers share: a label value quoted and
// escaped, and the # HELP / # TYPE lines of a metric family. It appends to
// byte slices and allocates nothing of its own.
//
// It does not own metric names, labels or their values (proxy's metrics,
// proxy/ratelimit and proxy/latency do) nor a registry.
package promtext

// AppendLabelValue appends s as a quoted label value: backslash, double quote
// and newline escaped.
func AppendLabelValue(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// AppendMetadata appends the # HELP and # TYPE lines of the metric family
// name, of type typ (counter, gauge, histogram).
func AppendMetadata(b []byte, name, typ, help string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}
