// A chat stream with openai on a key with a tokens limit, whose request the
// gateway edits to ask for the usage, against the same on a key without
// limits: the SDK must see the same chunks, none with usage. Run by
// cmd/gateway's TestJSSDKLimitedStream (not by TestJSSDKs: it needs two keys).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.GATEWAY_URL;
const model = process.env.GATEWAY_CHAT_MODEL;

async function chunks(key) {
  const client = new OpenAI({ baseURL: base + '/v1/router/beta/v1', apiKey: key, maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model, stream: true, messages: [{ role: 'user', content: 'hello' }],
  }, { headers: { 'x-sim-events': '6' } });
  const seen = [];
  for await (const chunk of stream) {
    assert.ok(!('usage' in chunk), `a chunk with usage: ${JSON.stringify(chunk)}`);
    assert.ok(chunk.choices.length > 0, `a chunk without choices: ${JSON.stringify(chunk)}`);
    seen.push(chunk.choices[0].delta?.content ?? '');
  }
  return seen;
}

const limited = await chunks(process.env.GATEWAY_LIMITED_KEY);
const free = await chunks(process.env.GATEWAY_FREE_KEY);
assert.deepEqual(limited, free);
assert.equal(limited.length, 8);
console.log(`ok: ${limited.length} chunks on both keys`);
