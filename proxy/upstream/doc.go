// Package upstream owns the gateway's policy towards the providers: the
// deployments (one provider account each, with its URL, credentials, the
// request line and credential headers it writes, and one pooled client of
// package wire), their health (consecutive failures exclude a deployment for
// a cooldown, health.go) and in-flight counts, the time to first byte that
// routing weighs (ewma.go, fed by the deployment's wire.Observer), the routes
// that pick a deployment of a model for a session (route.go, load.go), the
// classes of failures a call may be sent again for (retryreason.go) and each
// deployment's retry budget (retrybudget.go).
//
// And the relay of an answer back to the client (relay.go, stream.go):
// buffered, streamed, or SSE event by event, with the check that a stream
// reached its family's final event (ends.go), the read-ahead that takes a
// finished answer off its connection while the client does not read
// (ahead.go), the reading of the token usage an answer reports, the removal
// from a chat stream of what the gateway's own include_usage added
// (usage.go), and which of an answer's headers reach the client: the
// hop-by-hop ones, and those a Connection header names, do not
// (connection.go, whose reading of a Connection header proxy uses for the
// client's headers too).
//
// Its wire, HTTP/1.1 towards the providers, is package proxy/upstream/wire:
// the dial with its deadlines and TLS, the request's write, the answer's
// head and streamed body read from the connection, and Cancel. The relay
// reads a streamed answer's body through the body's exported methods (Ready,
// Share, Cut, RestFits, PinIdle) and the lines of its head through
// wire.Head; aliases.go names here what package proxy uses of the wire
// (Request, Cancel, IsDialError, OpenConns...), so that proxy speaks to
// this package alone of the upstream side.
//
// It does not own the client's side: authentication, the request's body and
// headers, the rejections answered without an upstream, which endpoint may
// be sent again, Responses ownership and metrics are package proxy's, which
// drives a call through Relay. It never imports proxy; it reads the
// configuration types of proxy/config and the native shapes of proxy/family.
package upstream
