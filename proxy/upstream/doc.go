// Package upstream owns the gateway's side towards the providers. Its
// policy: the deployments (one provider account each, with its URL,
// credentials and one pooled fasthttp.HostClient), their health (consecutive
// failures exclude a deployment for a cooldown, health.go) and in-flight
// counts, the routes that pick a deployment of a model for a session
// (route.go, load.go), the classes of failures a call may be sent again for
// (retryreason.go) and each deployment's retry budget (retrybudget.go).
//
// Its wire, HTTP/1.1 towards the providers: fasthttp pools the connections
// (dialing, keep-alive reuse, idle timeout, the bound on connections and the
// wait for one); the gateway writes requests itself (request.go), dials its
// own connections with their deadlines and TLS (dial.go), and reads answers
// itself where it can (transport.go): an answer's head when it is plainly
// framed (wire.ReadPlainHead, else fasthttp's public parser reads it) and a
// streamed body from the connection's bufio.Reader (answer.go, its chunks'
// framing read by package wire), so that a streamed call allocates nothing
// and the relay sees what is already read. Package proxy/upstream/wire owns
// that framing, and says where it reads answers differently from fasthttp.
// Cancel ends a call's wait from another goroutine (cancel.go).
//
// And the relay of an answer back to the client (relay.go, stream.go):
// buffered, streamed, or SSE event by event, with the check that a stream
// reached its family's final event (ends.go), the read-ahead that takes a
// finished answer off its connection while the client does not read
// (ahead.go), the reading of the token usage an answer reports, and the
// removal from a chat stream of what the gateway's own include_usage added
// (usage.go).
//
// It does not own the client's side: authentication, the request's body and
// headers, the rejections answered without an upstream, which endpoint may
// be sent again, Responses ownership and metrics are package proxy's, which
// drives a call through Relay. It never imports proxy; it reads the
// configuration types of proxy/config and the native shapes of proxy/family.
package upstream
