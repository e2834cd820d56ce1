// Package clientconn owns the gateway's client sockets below HTTP: the
// listeners and the connection each client's requests come over.
//
//   - NewListener and AdminListener: an accept that fails is retried instead
//     of ending the server, and a client connection that would take the
//     descriptors kept for upstream dials is closed at once (the process's
//     descriptor tally: LogDescriptors, OpenClients).
//   - Conn, the client connection fasthttp serves: a write's idle deadline
//     (a client that stops reading loses its connection, a slow one keeps
//     it), the held tail of an answer sent with the read for the next
//     request (HoldTail, the await of a pipelined request), the answer head's
//     lines spliced into the bytes fasthttp writes (TakeSplice, TookSplice,
//     ArmSplice, SpliceHead), the check of a request head's end that
//     fasthttp would wait on (HeadEndsBadly, ErrHeadEnd), the bound
//     of a chunked body's framing (BoundChunked), the client-gone watch
//     (WatchPeer), the close after an answer with a lingering drain
//     (CloseAfterAnswer), and a connection served again after a stream
//     written outside the server (TakeBuffered, ReadNext, HandOver).
//
// proxy finds a call's Conn as its RequestCtx's Conn and calls these per
// call; what it needs from proxy (metrics counters, the logger, the write
// timeout in force, the calls in flight) is passed in through
// ListenerConfig. It does not own the handlers, the hijacked streams' writer
// and their count for a shutdown (proxy's hijack.go), the metrics set, or
// the upstream connections, which it only reads the count of
// (proxy/upstream.OpenConns). It never imports proxy.
package clientconn
