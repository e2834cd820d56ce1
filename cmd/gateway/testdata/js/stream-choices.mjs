// What limited-stream.mjs and budget-stream.mjs share: a chat stream with the
// openai package on one key, whose request the gateway edits to ask for the
// stream's usage when the key is charged by tokens or money. The SDK must see
// no chunk with usage and none without choices, as on a key that is not.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

// streamChoices streams a chat of 6 simulated events on key, from
// GATEWAY_URL's beta route and GATEWAY_CHAT_MODEL, and returns each chunk's
// first choice.
export async function streamChoices(key) {
  const client = new OpenAI({ baseURL: process.env.GATEWAY_URL + '/v1/router/beta/v1', apiKey: key, maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: process.env.GATEWAY_CHAT_MODEL, stream: true, messages: [{ role: 'user', content: 'hello' }],
  }, { headers: { 'x-sim-events': '6' } });
  const choices = [];
  for await (const chunk of stream) {
    assert.ok(!('usage' in chunk), `a chunk with usage: ${JSON.stringify(chunk)}`);
    assert.ok(chunk.choices.length > 0, `a chunk without choices: ${JSON.stringify(chunk)}`);
    choices.push(chunk.choices[0]);
  }
  return choices;
}
