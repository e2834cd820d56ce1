// Package sim owns the upstream simulator: one fasthttp server that answers like one
// deployment (account) of each of the three provider families the gateway speaks to.
//
//   - alpha: the Anthropic Messages API (POST /v1/messages, plain and SSE).
//   - beta: the OpenAI API (chat completions, Responses with a per-deployment store,
//     image generation, the model list).
//   - gamma: the Gemini API (generateContent and streamGenerateContent?alt=sse).
//
// Answers, SSE framing, auth checks and error bodies follow what the official Go SDKs
// (openai-go/v3, anthropic-sdk-go, google.golang.org/genai) expect. Unknown top-level
// request fields are rejected the way the real providers reject them, so a test can
// prove that the gateway never leaks its own fields upstream.
//
// Request headers x-sim-latency, x-sim-events, x-sim-event-delay, x-sim-image-bytes
// and x-sim-fault control one answer; Server.SetFault controls every answer, and so does
// PUT /_sim/fault (a body in x-sim-fault's syntax, empty to clear) from another process.
//
// The package does not own the load generator, scenarios or reports (see bench/),
// and it keeps no state on disk: the Responses and image stores live in memory.
package sim
