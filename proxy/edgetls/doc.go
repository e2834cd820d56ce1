// Package edgetls owns the TLS of the client listener: the certificate and
// key, the client CA, their reload without a dropped connection, the key
// exchanges accepted in the operator's order, the bound on a client's
// handshake, and the watch on the certificate's expiry.
//
// It wraps a listener's connections in TLS and nothing more: what the gateway
// does with a client's connection (write idleness, held answers, head checks:
// proxy.Gateway.Listener) runs above it, on the plaintext. The socket tricks
// of package rawio that read and write the descriptor directly run below it,
// on the ciphertext, as for any TCP connection; those that wait for the
// client's next request on the descriptor cannot see through TLS, and are
// left off above it. It does not own the TLS toward upstreams (package
// upstream) nor the mapping of a client certificate to a caller.
package edgetls
