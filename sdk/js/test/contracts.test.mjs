// The shared refusals table (tests/contracts/*.json): the TypeScript SDK accepts and
// refuses exactly what the Python SDK and the server's contract models do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkClientMessage, checkIntervention, checkServerMessage, checkedOrigin, ControlError, InvalidDescriptor,
  RamClient, UnsafeOrigin, VisualError,
} from '../dist/index.js';
import { table } from './helpers.mjs';

const descriptors = table('descriptors.json');
const visual = table('visual_messages.json');
const where = { runId: descriptors.run_id, origin: descriptors.origin };

test('every valid descriptor of the table is accepted', () => {
  assert.ok(descriptors.valid.length >= 5);
  for (const { name, body } of descriptors.valid) {
    assert.deepEqual(checkIntervention(body, where), body.intervention, name);
  }
});

test('every invalid descriptor of the table is refused', () => {
  assert.ok(descriptors.invalid.length >= 40);
  for (const { name, body } of descriptors.invalid) {
    assert.throws(() => checkIntervention(body, where), InvalidDescriptor, name);
  }
});

test('every client message of the table is accepted or refused as the table says', () => {
  for (const { name, message } of visual.client.valid) assert.deepEqual(checkClientMessage(message), message, name);
  for (const { name, message } of visual.client.invalid) assert.throws(() => checkClientMessage(message), ControlError, name);
});

test('every server message of the table is accepted or refused as the table says', () => {
  for (const { name, message } of visual.server.valid) assert.deepEqual(checkServerMessage(message), message, name);
  for (const { name, message } of visual.server.invalid) assert.throws(() => checkServerMessage(message), VisualError, name);
});

test('the origin rule refuses anything but HTTPS or loopback', () => {
  for (const bad of ['http://example.com', 'http://10.0.0.8:8000', 'ftp://127.0.0.1', 'https://user:secret@ram.example',
    'https://ram.example/api', 'https://ram.example/?next=/', 'https://ram.example/#x', 'ram.example']) {
    assert.throws(() => checkedOrigin(bad), UnsafeOrigin, bad);
    assert.throws(() => new RamClient({ baseUrl: bad, credential: () => 'unused' }), UnsafeOrigin, bad);
  }
  assert.equal(checkedOrigin('https://RAM.example:443/'), 'https://ram.example');
  assert.equal(checkedOrigin('http://[::1]:8000'), 'http://[::1]:8000');
  assert.equal(checkedOrigin('http://localhost/'), 'http://localhost');
});

test('a continue without a valid idempotency key is refused before anything is sent', async () => {
  let asked = 0;
  const ram = new RamClient({ baseUrl: 'http://127.0.0.1:9', credential: () => { asked += 1; return 'unused'; } });
  const run = '11111111-1111-4111-8111-111111111111';
  for (const idempotencyKey of [undefined, '', 'short', 'has space in it', 'x'.repeat(201)]) {
    await assert.rejects(ram.runs.continue(run, { idempotencyKey }), TypeError);
  }
  await assert.rejects(ram.runs.continue(run, {}), TypeError);
  await assert.rejects(ram.runs.get('not-a-uuid'), TypeError);
  assert.equal(asked, 0);
});
