package sim

// The cached and reasoning token counts every answer reports beside its
// input and output counts, derived from them so that they are deterministic
// and not zero: tests compare the gateway's token counters with them.

// cachedTokens is the part of in reported as read from the prompt cache.
func cachedTokens(in int64) int64 { return in / 4 }

// reasoningTokens is the reasoning count reported with out output tokens.
func reasoningTokens(out int64) int64 { return out / 8 }
