// A chat stream with openai on a key with a tokens limit, whose request the
// gateway edits to ask for the usage, against the same on a key without
// limits: the SDK must see the same chunks, none with usage. Run by
// cmd/gateway's TestJSSDKLimitedStream (not by TestJSSDKs: it needs two keys).
import assert from 'node:assert/strict';
import { streamChoices } from './stream-choices.mjs';

async function chunks(key) {
  return (await streamChoices(key)).map((c) => c.delta?.content ?? '');
}

const limited = await chunks(process.env.GATEWAY_LIMITED_KEY);
const free = await chunks(process.env.GATEWAY_FREE_KEY);
assert.deepEqual(limited, free);
assert.equal(limited.length, 8);
console.log(`ok: ${limited.length} chunks on both keys`);
