// Package clientconn owns the gateway's client-facing listeners below HTTP:
// the accept that retries what fails instead of ending the server
// (Acceptor, AdminListener) and the tally of the process's file descriptors
// that closes a client connection at once when it would take the
// descriptors kept for upstream dials (AdmitClient, ClientClosed,
// LogDescriptors), and the check of a request head's end that fasthttp
// would wait on (HeadScan, HeadEndsBadly, ErrHeadEnd).
//
// It does not own the client connection's wrapper and what it does per
// request (head checks, a held answer's head, splices, bounded chunked
// bodies, the close after an answer: package proxy, clientconn.go), the
// metrics set the counters it is given belong to, or the upstream
// connections, which it only reads the count of (proxy/upstream.OpenConns).
// It never imports proxy.
package clientconn
