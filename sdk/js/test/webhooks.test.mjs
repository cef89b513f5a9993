// Webhook signatures: verifyWebhook accepts what the official Standard Webhooks signer
// produced (a fixed vector from the `standardwebhooks` package) and refuses anything forged,
// altered, replayed or keyed otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { signWebhook, verifyWebhook, WebhookVerificationError } from '../dist/index.js';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const body = '{"type":"run.paused","timestamp":"2026-11-30T18:00:00.000Z","data":{"run_id":"2f1c4b9e-0000-4000-8000-000000000001"}}';
const stamp = 1796061600;
// standardwebhooks.Webhook(secret).sign('msg_p5jXN8AQM9LWM0D4loKWxJek', <stamp>, body)
const official = 'v1,fA5vqhnGV3Us7smByTnr7fpfDvb30Y2oo6zDZzUTkZc=';
const headers = { 'Webhook-Id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': String(stamp), 'webhook-signature': official };
const at = { now: stamp + 10 };

test('a webhook signed the Standard Webhooks way is verified and parsed', async () => {
  assert.equal(await signWebhook(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', stamp, body), official);
  const event = await verifyWebhook(secret, body, headers, at);
  assert.equal(event.type, 'run.paused');
  assert.deepEqual(await verifyWebhook(secret, new TextEncoder().encode(body), new Headers(headers), at), event);
});

test('during a rotation either signature verifies, and a receiver may hold several secrets', async () => {
  const other = 'whsec_' + Buffer.from(new Uint8Array(32).fill(7)).toString('base64');
  const both = { ...headers, 'webhook-signature': `${await signWebhook(other, headers['Webhook-Id'], stamp, body)} ${official}` };
  await verifyWebhook(secret, body, both, at);
  await verifyWebhook(other, body, both, at);
  await verifyWebhook([other, secret], body, headers, at);
});

test('a forged, altered, replayed or otherwise keyed webhook is refused', async () => {
  const other = 'whsec_' + Buffer.from(new Uint8Array(32).fill(1)).toString('base64');
  const cases = [
    [secret, body, { ...headers, 'webhook-signature': 'v1,' + Buffer.alloc(32).toString('base64') }, at],
    [secret, body.replace('run.paused', 'run.succeeded'), headers, at],
    [secret, body, { ...headers, 'Webhook-Id': 'msg_other' }, at],
    [other, body, headers, at],
    [secret, body, headers, { now: stamp + 301 }],
    [secret, body, headers, { now: stamp - 301 }],
    [secret, body, { ...headers, 'webhook-signature': official.replace('v1,', 'v2,') }, at],
    [secret, body, { 'webhook-timestamp': String(stamp), 'webhook-signature': official }, at],
  ];
  for (const [key, content, bag, options] of cases) {
    await assert.rejects(verifyWebhook(key, content, bag, options), WebhookVerificationError);
  }
  await assert.rejects(verifyWebhook('not-a-secret', body, headers, at), TypeError);
});
