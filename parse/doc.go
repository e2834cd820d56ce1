// Package parse owns the gateway's zero-allocation looks into request and response bodies:
// Peek reads the few top-level fields that routing needs from a JSON request body and checks
// that the body is valid JSON, AppendWithoutSessionID splices the gateway's own session_id
// member out of the raw bytes (AppendForUpstream also puts a deployment's own model name in
// place of the model's value, in the same pass), Member reads one raw value out of a JSON object, and Scanner
// splits a server-sent-events stream into events.
//
// It does not decode bodies into maps or structs, re-encode anything, know about providers,
// routes or HTTP, or allocate on its hot paths once its reusable values are warm. Byte slices it
// returns point into the caller's input or into the reusable value's own buffers; each type and
// function says how long they stay valid.
package parse
