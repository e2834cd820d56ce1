// Package proxy owns the gateway's client side: the fasthttp handlers of
// every family and endpoint, authentication, the rejections answered without
// an upstream, the lifecycle of one request (call: read, peek, route, forward,
// finish), Responses ownership, user-data files, images, the Gateway with its
// reloadable state, metrics and the access log, and its listeners (a failed
// accept retried, client connections refused to keep file descriptors for
// upstream dials).
//
// It does not own the configuration's types, loading and validation
// (proxy/config), the families' native error shapes (proxy/family), the
// deployments, their connections, health and the relay of answers and SSE
// (proxy/upstream), body parsing (parse), the choice of a deployment for a
// session (affinity), the keys' rate limits and their counters
// (proxy/ratelimit: proxy asks it before a call is routed and writes the
// refusal), the callers' keys as records and the snapshot the request path
// reads (proxy/keys), the admin API's handlers (proxy/admin), the spans of
// traces (proxy/trace), the client listener's TLS and its reload
// (proxy/edgetls) or durable records (store). Its sub-packages never import
// it.
package proxy
