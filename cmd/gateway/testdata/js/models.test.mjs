// The model list where each SDK looks for it: the beta list on the OpenAI
// base URL (and at /v1/models), the alpha list in the Anthropic shape on
// every alpha base; each with retrieve-one and the family's auth.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { base, key, chatModel, imageModel, rejects } from './env.mjs';

const alpha = (prefix, k = key) => new Anthropic({ baseURL: base + prefix, apiKey: null, authToken: k, maxRetries: 0 });
const beta = (prefix, k = key) => new OpenAI({ baseURL: base + prefix, apiKey: k, maxRetries: 0 });

test('alpha models.list and models.retrieve on every alpha base', async () => {
  for (const prefix of ['/v1/router/alpha', '/alpha', '/alpha/a']) {
    const cl = alpha(prefix);
    const ids = [];
    for await (const m of cl.models.list()) {
      assert.equal(m.type, 'model');
      assert.ok(m.display_name && !Number.isNaN(Date.parse(m.created_at)), JSON.stringify(m));
      ids.push(m.id);
    }
    // Only models with an alpha deployment: the image model has none.
    assert.deepEqual(ids, [chatModel], prefix);
    const one = await cl.models.retrieve(chatModel);
    assert.equal(one.id, chatModel);
    await rejects(cl.models.retrieve(imageModel), 404);
  }
});

test('beta models.list and models.retrieve on the beta base', async () => {
  const cl = beta('/v1/router/beta/v1');
  const ids = [];
  for await (const m of cl.models.list()) {
    assert.equal(m.object, 'model');
    ids.push(m.id);
  }
  assert.deepEqual(ids.sort(), [chatModel, imageModel].sort());
  const one = await cl.models.retrieve(chatModel);
  assert.equal(one.id, chatModel);
  assert.ok(one.supported_parameters.includes('reasoning'), JSON.stringify(one));
  await rejects(cl.models.retrieve('no-such-model'), 404);
  // The same list where the spec puts it.
  const top = beta('/v1');
  const topIDs = [];
  for await (const m of top.models.list()) topIDs.push(m.id);
  assert.deepEqual(topIDs.sort(), ids.sort());
});

test('the model lists refuse a wrong key natively', async () => {
  await rejects(alpha('/v1/router/alpha', 'wrong').models.list(), 401);
  await rejects(beta('/v1/router/beta/v1', 'wrong').models.list(), 401);
  await rejects(beta('/v1/router/beta/v1', 'wrong').models.retrieve(chatModel), 401);
  await rejects(alpha('/alpha/a', 'wrong').models.retrieve(chatModel), 401);
});
