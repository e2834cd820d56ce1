// The beta family through openai: chat and responses plain and streamed,
// every responses call, images and the files list, all on
// the one base URL an OpenAI client is given.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic, { toFile } from '@anthropic-ai/sdk';
import { base, key, chatModel, imageModel, png, rejects } from './env.mjs';

const client = new OpenAI({ baseURL: base + '/v1/router/beta/v1', apiKey: key, maxRetries: 0 });
const hello = [{ role: 'user', content: 'hello' }];

test('chat.completions.create', async () => {
  const c = await client.chat.completions.create({ model: chatModel, messages: hello });
  assert.equal(c.object, 'chat.completion');
  assert.ok(c.choices[0].message.content.length > 0);
});

test('chat.completions.create streamed', async () => {
  const stream = await client.chat.completions.create({ model: chatModel, messages: hello, stream: true });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.ok(chunks > 1 && text.length > 0, `${chunks} chunks, ${JSON.stringify(text)}`);
});

test('responses: create, stream, retrieve, input items, input tokens, compact, delete', async () => {
  const r = await client.responses.create({ model: chatModel, input: 'hello' });
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed');
  assert.ok(r.output_text.length > 0);

  // A continuation inherits the route model from the owned response.
  const stream = await client.responses.create({ previous_response_id: r.id, input: 'and then?', stream: true });
  const types = [];
  let last;
  for await (const ev of stream) {
    types.push(ev.type);
    last = ev;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(last.type, 'response.completed');
  const r2 = last.response;

  assert.equal((await client.responses.retrieve(r2.id)).id, r2.id);
  const items = [];
  for await (const it of client.responses.inputItems.list(r.id)) items.push(it);
  assert.ok(items.length > 0);
  const n = await client.responses.inputTokens.count({ model: chatModel, input: 'count me' });
  assert.equal(n.object, 'response.input_tokens');
  assert.ok(n.input_tokens > 0);
  const compacted = await client.responses.compact({ model: chatModel, previous_response_id: r2.id, input: 'shorter' });
  assert.equal(compacted.object, 'response.compaction');

  const del = await client.responses.delete(r2.id);
  assert.deepEqual(del, { id: r2.id, object: 'response.deleted', deleted: true });
  await rejects(client.responses.retrieve(r2.id), 404);
});

test('responses.create refuses a missing model without an owned previous response', async () => {
  await rejects(client.responses.create({ input: 'hello' }), 400);
});

test('images.generate', async () => {
  const img = await client.images.generate({ model: imageModel, prompt: 'a red dot', size: '256x256' });
  assert.ok(img.created > 0);
  const b64 = img.data[0].b64_json;
  assert.ok(b64 && Buffer.from(b64, 'base64').subarray(1, 4).toString() === 'PNG');
});

test('files.list sees what the key uploaded', async () => {
  const alpha = new Anthropic({ baseURL: base + '/v1/router/alpha', apiKey: null, authToken: key, maxRetries: 0 });
  const up = await alpha.files.upload({ file: await toFile(png, 'beta.png', { type: 'image/png' }) });
  const seen = new Map();
  for await (const f of client.files.list({ limit: 2 })) seen.set(f.id, f);
  const f = seen.get(up.id);
  assert.ok(f, `${up.id} not listed`);
  assert.equal(f.object, 'file');
  assert.equal(f.bytes, png.length);
  assert.equal(f.filename, 'beta.png');
  await alpha.files.delete(up.id);
});

test('a wrong key is refused natively', async () => {
  const bad = new OpenAI({ baseURL: base + '/v1/router/beta/v1', apiKey: 'wrong', maxRetries: 0 });
  await rejects(bad.chat.completions.create({ model: chatModel, messages: hello }), 401);
});
