// openai on a key with a money budget, run by cmd/gateway's TestJSSDKBudget
// in two steps (GATEWAY_STEP):
//   stream:  a chat stream without stream_options on the budgeted key, whose
//            request the gateway edits to ask for the usage, against the same
//            on a key without budget: the SDK must see the same chunks, none
//            with usage;
//   refused: once the budget is spent, a call is refused with the SDK's 429
//            error, code insufficient_quota, which the SDK does not retry (the
//            client keeps its default retries: the test counts the calls).
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { streamChoices } from './stream-choices.mjs';

const base = process.env.GATEWAY_URL + '/v1/router/beta/v1';
const model = process.env.GATEWAY_CHAT_MODEL;
const budgeted = process.env.GATEWAY_BUDGET_KEY;

async function chunks(key) {
  return (await streamChoices(key)).map((c) => ({ delta: c.delta, finish_reason: c.finish_reason }));
}

switch (process.env.GATEWAY_STEP) {
  case 'stream': {
    const charged = await chunks(budgeted);
    const free = await chunks(process.env.GATEWAY_FREE_KEY);
    assert.deepEqual(charged, free);
    // A role chunk, 6 content chunks, the finish chunk.
    assert.equal(charged.length, 8);
    console.log(`ok: ${charged.length} chunks on both keys`);
    break;
  }
  case 'refused': {
    const client = new OpenAI({ baseURL: base, apiKey: budgeted }); // default retries: 2
    await assert.rejects(
      client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'hello' }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.RateLimitError, `not a RateLimitError: ${err}`);
        assert.equal(err.status, 429);
        assert.equal(err.code, 'insufficient_quota');
        assert.equal(err.type, 'insufficient_quota');
        assert.equal(err.headers?.get?.('x-should-retry') ?? err.headers?.['x-should-retry'], 'false');
        return true;
      },
    );
    console.log('ok: refused with insufficient_quota');
    break;
  }
  default:
    throw new Error(`GATEWAY_STEP must be stream or refused, not ${process.env.GATEWAY_STEP}`);
}
