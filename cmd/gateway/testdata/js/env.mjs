// What every test file shares: the gateway under test, from the environment
// that cmd/gateway's TestJSSDKs sets, and a small valid PNG.
import assert from 'node:assert/strict';

export const base = process.env.GATEWAY_URL;
export const key = process.env.GATEWAY_KEY;
export const chatModel = process.env.GATEWAY_CHAT_MODEL ?? 'demo-chat';
export const imageModel = process.env.GATEWAY_IMAGE_MODEL ?? 'demo-image';

assert.ok(base && key, 'GATEWAY_URL and GATEWAY_KEY must be set (run through go test ./cmd/gateway -run TestJSSDKs)');

// A 1x1 RGBA PNG.
export const png = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);

// rejects asserts that promise fails with an SDK error of the given HTTP status.
export async function rejects(promise, status) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.status, status, `want HTTP ${status}, got ${err.status}: ${err.message}`);
    return true;
  });
}
