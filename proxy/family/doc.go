// Package family names the provider protocol families the gateway speaks
// (alpha: Anthropic-like, beta: OpenAI-like, gamma: Gemini-like) and owns
// the shapes the gateway writes in each family's own form: the error body,
// the error type or status name that goes with each HTTP status, and the
// frame that ends a stream the upstream broke off. The upstream simulator
// (bench/sim) takes its error types from here too, so the gateway and the
// simulator cannot drift apart.
//
// It does not own when an error is answered or with which status (package
// proxy), nor how an answer is relayed (package proxy/upstream).
package family
