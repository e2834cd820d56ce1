// Package parse owns the gateway's zero-allocation looks into request and response bodies:
// Peek reads the few top-level fields that routing needs from a JSON request body, checks
// that the body is valid JSON and that no field the gateway reads appears twice or under a
// spelling that another decoder would read differently (keys.go), AppendWithoutSessionID splices the gateway's own session_id
// member out of the raw bytes (AppendForUpstream also puts a deployment's own model name in
// place of the model's value, in the same pass; AppendAskingUsage also sets a chat stream's
// stream_options.include_usage, and IsAddedUsageEvent and AppendWithoutUsageNull find what that
// adds to the answer: askusage.go), Member reads one raw value out of a JSON
// object, Splitter splits a server-sent-events stream into lines and events, and Scanner reads
// its events.
//
// It does not decode bodies into maps or structs, re-encode anything, know about providers,
// routes or HTTP, or allocate on its hot paths once its reusable values are warm. Byte slices it
// returns point into the caller's input or into the reusable value's own buffers; each type and
// function says how long they stay valid.
//
// # Why Peek is a scanner of its own, not fastjson
//
// The design first named fastjson for the peek. Peek is a hand-written one-pass scanner
// instead, for reasons that fastjson_test.go holds as tests and measures as benchmarks:
//
//   - It yields byte spans: where session_id's member starts and ends, with its comma, which
//     the splice that removes it needs. fastjson hands out values, not their places.
//   - It keeps no copy of the body. A warm fastjson.Parser copies the body and keeps a Value
//     per JSON value it met: after the 1 MiB chat body of BenchmarkRetainedAfter1MiB (many
//     small messages, as a long conversation is) it holds 43.7 MiB; Fields holds nothing
//     (0.0003 MiB). Pooled per request or per connection, that would be held between requests.
//   - It validates strictly in one pass, as encoding/json does: fastjson accepts a string with
//     an invalid escape ("\x") or a raw control character, which a provider's parser refuses.
//   - It sees every occurrence of a key. fastjson's Get returns the first of two equal keys
//     where encoding/json, like the providers' parsers, takes the last: the gateway and the
//     provider would read different values.
//   - It nests as deep as encoding/json (10000 levels); fastjson stops at 300.
//
// Speed is not what decides it. BenchmarkPeekVsFastjson on the 2-core development machine:
// the small chat body in 652 ns with Peek and 483 ns with a warm fastjson.Parser, neither
// allocating; the 1 MiB body in 1.19 ms with Peek (0 allocations) and 2.17 ms with fastjson
// (144 allocations, 84 KiB). Run them with
//
//	go test -run '^$' -bench 'PeekVsFastjson|RetainedAfter1MiB' -benchmem ./parse/
package parse
