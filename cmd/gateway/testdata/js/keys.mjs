// openai with a key made through the admin API: with GATEWAY_WANT=200 a chat
// completion and the model list succeed; with GATEWAY_WANT=401 (the key revoked)
// both fail with the beta family's 401. Run by cmd/gateway's TestJSSDKAdminKey (not
// by TestJSSDKs: it needs a key made at runtime).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.GATEWAY_URL;
const key = process.env.GATEWAY_KEY;
const model = process.env.GATEWAY_CHAT_MODEL;
const want = process.env.GATEWAY_WANT;
assert.ok(base && key && model && want, 'GATEWAY_URL, GATEWAY_KEY, GATEWAY_CHAT_MODEL and GATEWAY_WANT must be set');

const client = new OpenAI({ baseURL: base + '/v1/router/beta/v1', apiKey: key, maxRetries: 0 });
const calls = {
  'chat.completions.create': () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] }),
  'models.list': async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    return ids;
  },
};

for (const [name, call] of Object.entries(calls)) {
  if (want === '200') {
    const got = await call();
    if (name === 'models.list') assert.ok(got.includes(model), `${model} not listed: ${JSON.stringify(got)}`);
    else assert.ok(got.choices[0].message.content.length > 0, JSON.stringify(got));
    console.log(`ok: ${name} succeeds`);
    continue;
  }
  await assert.rejects(call(), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, `${name}: want an AuthenticationError, got ${err}`);
    assert.equal(err.status, 401);
    assert.equal(err.type, 'invalid_request_error', `${name}: ${JSON.stringify(err.error)}`);
    assert.match(err.error?.message ?? '', /invalid API key/, `${name}: ${JSON.stringify(err.error)}`);
    return true;
  });
  console.log(`ok: ${name} refused with the beta family's 401`);
}
