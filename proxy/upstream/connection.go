package upstream

import "bytes"

// A message's Connection header may name headers of its own besides the
// connection options close and keep-alive: those are hop-by-hop, meant for
// the next hop only, and RFC 9110 §7.6.1 has a proxy drop them along with
// the Connection header itself. The gateway does so both ways: the client's
// headers that its Connection header names never reach the upstream, and
// the upstream's never reach the client.

// ConnectionOptions reports whether value, a Connection header's, names
// anything but close and keep-alive.
func ConnectionOptions(value []byte) bool {
	for len(value) > 0 {
		var opt []byte
		opt, value = nextListItem(value)
		if len(opt) > 0 && !bytes.EqualFold(opt, []byte("close")) && !bytes.EqualFold(opt, []byte("keep-alive")) {
			return true
		}
	}
	return false
}

// NamedIn reports whether list, a comma-separated list of header names such
// as a Connection header's value, names name, in any case.
func NamedIn(list, name []byte) bool {
	for len(list) > 0 {
		var item []byte
		item, list = nextListItem(list)
		if bytes.EqualFold(item, name) {
			return true
		}
	}
	return false
}

// nextListItem splits the first item off a comma-separated list, without the
// spaces and tabs around it.
func nextListItem(list []byte) (item, rest []byte) {
	item, rest, _ = bytes.Cut(list, []byte(","))
	return bytes.Trim(item, " \t"), rest
}
