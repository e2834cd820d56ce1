// Package upstream owns the gateway's side towards the providers: the
// deployments (one provider account each, with its URL, credentials and one
// pooled fasthttp.HostClient), their health (consecutive failures exclude a
// deployment for a cooldown) and in-flight counts, the routes that pick a
// deployment of a model for a session, the connections (read deadlines,
// TLS, and Cancel, which ends a call's wait from another goroutine), the
// reading of answers (fasthttp pools the connections and parses
// headers; the gateway writes requests and reads streamed bodies itself, see
// transport.go), and the relay of an answer back to the client: buffered, streamed, or SSE
// event by event, with the check that a stream reached its family's final
// event, the read-ahead that takes a finished answer off its connection
// while the client does not read (ahead.go), the reading of the token usage an answer reports, and the removal
// from a chat stream of what the gateway's own include_usage added (usage.go).
//
// It does not own the client's side: authentication, the request's body and
// headers, the rejections answered without an upstream, Responses ownership
// and metrics are package proxy's, which drives a call through Relay. It
// never imports proxy; it reads the configuration types of proxy/config and
// the native shapes of proxy/family.
package upstream
