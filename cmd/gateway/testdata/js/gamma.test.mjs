// The gamma family through @google/genai: generateContent with an image
// config on every base and API version. genai always sends its own key as
// x-goog-api-key; the gateway's key goes in x-gamma-api-key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GoogleGenAI } from '@google/genai';
import { base, key, imageModel, chatModel } from './env.mjs';

function client(prefix, apiVersion, platformKey = key) {
  return new GoogleGenAI({
    apiKey: 'not-sent-upstream',
    httpOptions: { baseUrl: base + prefix, apiVersion, headers: { 'x-gamma-api-key': platformKey } },
  });
}

const request = {
  model: imageModel,
  contents: [{ role: 'user', parts: [{ text: 'a blue square' }] }],
  config: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '1K' } },
};

for (const prefix of ['/v1/router/gamma', '/gamma', '/gamma/b']) {
  for (const version of ['v1beta', 'v1']) {
    test(`generateContent with an image config on ${prefix}/${version}`, async () => {
      const resp = await client(prefix, version).models.generateContent(request);
      const part = resp.candidates[0].content.parts.find((p) => p.inlineData);
      assert.ok(part, JSON.stringify(resp));
      assert.equal(part.inlineData.mimeType, 'image/png');
      const img = Buffer.from(part.inlineData.data, 'base64');
      assert.equal(img.subarray(1, 4).toString(), 'PNG');
      // 16:9 at 1K: the simulator draws 32 pixels on the long side.
      assert.deepEqual([img.readUInt32BE(16), img.readUInt32BE(20)], [32, 18]);
      assert.ok(resp.usageMetadata);
    });
  }
}

test('generateContent refuses a model that is not an image model', async () => {
  await assert.rejects(
    client('/v1/router/gamma', 'v1beta').models.generateContent({ ...request, model: chatModel }),
    (err) => err.status >= 400 && err.status < 500,
  );
});

test('generateContent refuses a wrong key', async () => {
  await assert.rejects(
    client('/v1/router/gamma', 'v1beta', 'wrong').models.generateContent(request),
    (err) => err.status === 401 || err.status === 403,
  );
});
