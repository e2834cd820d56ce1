// Package accesslog owns the gateway's access log: one line per call, written
// when the call ends, in exactly the bytes log/slog's TextHandler or
// JSONHandler (default options) would write for the same time, level, message
// and attributes, so that the parsers of those lines see no change. A line is
// built into a pooled buffer without slog's Record (which keeps five
// attributes inline and allocates for more) and written with one Write; it
// allocates nothing.
//
// It owns the encoding of the line's values (strings quoted or escaped as slog
// does, so that no value a client sends can start a line of its own) and the
// write. It does not own which attributes a call's line holds, nor their
// order: the caller (proxy's observe.go) adds them. A *slog.Logger given by an
// embedder is still served, through slog itself (FromSlog).
package accesslog
