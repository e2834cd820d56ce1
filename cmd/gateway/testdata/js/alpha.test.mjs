// The alpha family through @anthropic-ai/sdk: messages plain and streamed on
// every base, and files (upload, list, use by id, refused download,
// delete).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic, { toFile } from '@anthropic-ai/sdk';
import { base, key, chatModel, png, rejects } from './env.mjs';

const bases = ['/v1/router/alpha', '/alpha', '/alpha/a'];

function client(prefix = bases[0]) {
  return new Anthropic({ baseURL: base + prefix, apiKey: null, authToken: key, maxRetries: 0 });
}

const hello = { model: chatModel, max_tokens: 64, messages: [{ role: 'user', content: 'hello' }] };

for (const prefix of bases) {
  test(`messages.create on ${prefix}`, async () => {
    const msg = await client(prefix).messages.create(hello);
    assert.equal(msg.type, 'message');
    assert.match(msg.id, /^msg_/);
    assert.ok(msg.content.length > 0 && msg.content[0].text.length > 0, JSON.stringify(msg.content));
  });

  test(`messages.stream on ${prefix}`, async () => {
    const stream = client(prefix).messages.stream({ ...hello, session_id: 'js-alpha-session' });
    const kinds = new Set();
    stream.on('streamEvent', (ev) => kinds.add(ev.type));
    const msg = await stream.finalMessage();
    for (const k of ['message_start', 'content_block_delta', 'message_stop']) {
      assert.ok(kinds.has(k), `no ${k} event in ${[...kinds]}`);
    }
    assert.ok(msg.content[0].text.length > 0);
  });
}

test('messages.create refuses an unknown model natively', async () => {
  await rejects(client().messages.create({ ...hello, model: 'no-such-model' }), 404);
});

test('files: upload, list, use by id, refused download, delete', async () => {
  const cl = client();
  const up = await cl.files.upload({ file: await toFile(png, 'dot.png', { type: 'image/png' }) });
  assert.match(up.id, /^file_svc_[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(up.filename, 'dot.png');
  assert.equal(up.mime_type, 'image/png');
  assert.equal(up.size_bytes, png.length);
  assert.equal(up.downloadable, false);

  const meta = await cl.files.retrieveMetadata(up.id);
  assert.equal(meta.id, up.id);
  const listed = [];
  for await (const f of cl.files.list({ limit: 10 })) listed.push(f.id);
  assert.ok(listed.includes(up.id), `${up.id} not in ${listed}`);
  // The same file through a grouped alias base.
  assert.equal((await client('/alpha/b').files.retrieveMetadata(up.id)).id, up.id);

  const msg = await cl.messages.create({
    model: chatModel,
    max_tokens: 64,
    messages: [{
      role: 'user',
      content: [
        { type: 'text', text: 'what is in this picture?' },
        { type: 'image', source: { type: 'file', file_id: up.id } },
      ],
    }],
  });
  assert.equal(msg.type, 'message');

  await rejects(cl.files.download(up.id), 403);
  const del = await cl.files.delete(up.id);
  assert.deepEqual({ id: del.id, type: del.type }, { id: up.id, type: 'file_deleted' });
  await rejects(cl.files.retrieveMetadata(up.id), 404);
  await rejects(cl.files.delete(up.id), 404);
});

test('a wrong key is refused natively', async () => {
  const cl = new Anthropic({ baseURL: base + bases[0], apiKey: null, authToken: 'wrong', maxRetries: 0 });
  await rejects(cl.messages.create(hello), 401);
});
