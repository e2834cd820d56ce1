// Package proxy owns the gateway's client side: the fasthttp handlers of
// every family and endpoint, the rejections answered without an upstream,
// Responses ownership, user-data files, images, the Gateway with its
// reloadable state, metrics and the access log, and the streamed answers
// written on a hijacked client connection (hijack.go).
//
// A call's way, top to bottom: gateway.go routes the request to its
// endpoint's handler, which acquires a call (call.go); intake.go
// authenticates the caller (its credential headers and its key, against the
// keys' snapshot of callerkeys.go or the Verifier of auth.go; a client
// certificate in clientcert.go), reads the body within
// the request bodies' budget (bodybudget.go), peeks at the fields routing
// needs and resolves the model to a route (fallback.go for a model's
// fallbacks); forward.go admits the call by its key's limits (limits.go),
// picks a deployment, sends the request (its head built by
// upstreamrequest.go), decides every send again (again), and relays the
// answer, the call being a streamed answer's body reader; observe.go counts
// the call and writes its access log line when it ends.
//
// It does not own the configuration's types, loading and validation
// (proxy/config), the families' native error shapes (proxy/family), the
// deployments, their connections, health and the relay of answers and SSE
// (proxy/upstream), the answers' HTTP/1.1 framing that the gateway reads
// instead of fasthttp (proxy/upstream/wire), body parsing (parse), the choice of a deployment for a
// session (affinity), the keys' rate limits and their counters
// (proxy/ratelimit: proxy asks it before a call is routed and writes the
// refusal), the callers' keys as records and the snapshot the request path
// reads (proxy/keys), the admin API's handlers (proxy/admin), the spans of
// traces (proxy/trace), the access line's bytes and write (proxy/accesslog),
// the client listener's TLS and its reload
// (proxy/edgetls), the client's socket: the listeners, the descriptor
// tally, the connection's head checks, held answers, spliced heads, bounded
// chunked bodies and lingering close (proxy/clientconn) or durable records (store). Where the keys are stored and
// where the rate limits keep their buckets is wired by the caller (Options.Keys,
// Options.Limits), never guessed from the store. Its sub-packages never import
// it.
package proxy
