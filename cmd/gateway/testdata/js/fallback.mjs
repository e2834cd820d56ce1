// openai calling a model whose only deployment answers 429, plain and streamed: on
// GATEWAY_URL (retries left) the SDK gets one success from the fallback model and
// x-gateway-model names it; on GATEWAY_SPENT_URL (retry.attempts 1) the SDK gets the
// deployment's own 429 as it was (GATEWAY_BUSY_ANSWER, with its retry-after). Run by
// cmd/gateway's TestJSSDKFallback (not by TestJSSDKs: it needs its own deployments).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const key = process.env.GATEWAY_KEY;
const client = (base) => new OpenAI({ baseURL: base + '/v1/router/beta/v1', apiKey: key, maxRetries: 0 });
const messages = [{ role: 'user', content: 'hello' }];
const fallback = client(process.env.GATEWAY_URL);
const spent = client(process.env.GATEWAY_SPENT_URL);

{
  const { data, response } = await fallback.chat.completions.create({ model: 'busy-model', messages }).withResponse();
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-gateway-model'), 'spare-model');
  assert.match(data.choices[0].message.content, /deployment spare\b/);
  console.log(`ok: plain, served by ${response.headers.get('x-gateway-model')}`);
}
{
  const { data: stream, response } = await fallback.chat.completions
    .create({ model: 'busy-model', messages, stream: true }).withResponse();
  assert.equal(response.headers.get('x-gateway-model'), 'spare-model');
  assert.match(response.headers.get('content-type'), /^text\/event-stream/);
  let text = '';
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.match(text, /deployment spare\b/);
  assert.equal(finish, 'stop');
  console.log(`ok: streamed, ${chunks} chunks served by ${response.headers.get('x-gateway-model')}`);
}

const want = JSON.parse(process.env.GATEWAY_BUSY_ANSWER);
const header = (err, name) => (typeof err.headers?.get === 'function' ? err.headers.get(name) : err.headers?.[name]) ?? null;
for (const [model, stream] of [['busy-model', false], ['busy2-model', true]]) {
  await assert.rejects(spent.chat.completions.create({ model, messages, stream }), (err) => {
    assert.ok(err instanceof OpenAI.RateLimitError, `${model}: ${err}`);
    assert.equal(err.status, 429);
    assert.deepEqual(err.error, want.error);
    assert.equal(header(err, 'retry-after'), process.env.GATEWAY_BUSY_RETRY_AFTER);
    assert.equal(header(err, 'x-gateway-model'), null);
    return true;
  });
  console.log(`ok: ${stream ? 'streamed' : 'plain'} with the retries spent: the deployment's 429 as it was`);
}
