// Computers through the TypeScript client against the live server: create one named by an id of
// the account's own, refuse an id used before, delete it, and its id then answers 404.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RamClient, RamError } from '../dist/index.js';
import { live } from './helpers.mjs';

const env = live();
const ram = new RamClient({ baseUrl: env.origin, credential: async () => env.key, timeoutMs: 30_000 });

test('a computer is created, refused twice, deleted and then not found', async () => {
  const created = await ram.computers.create({ id: 'js-made', name: 'From the SDK' });
  assert.deepEqual([created.id, created.name, created.state, created.available], ['js-made', 'From the SDK', 'stopped', false]);
  assert.deepEqual(await ram.computers.get('js-made'), created);
  const twice = await ram.computers.create({ id: 'js-made' }).catch((e) => e);
  assert.ok(twice instanceof RamError);
  assert.equal(twice.status, 409);
  assert.throws(() => ram.computers.create({ id: '-bad id' }), TypeError);
  // An explicit start (202): the computer reads starting until an executor host runs it.
  const started = await ram.computers.start('js-made');
  assert.deepEqual([started.id, started.state, started.available], ['js-made', 'starting', false]);
  assert.equal((await ram.computers.get('js-made')).state, 'starting');
  assert.throws(() => ram.computers.start('-bad id'), TypeError);
  assert.equal((await ram.computers.start('js-absent').catch((e) => e)).status, 404);
  assert.equal(await ram.computers.delete('js-made'), undefined);
  const gone = await ram.computers.get('js-made').catch((e) => e);
  assert.equal(gone.status, 404);
  assert.equal((await ram.computers.delete('js-made').catch((e) => e)).status, 404);
  const retired = await ram.computers.create({ id: 'js-made' }).catch((e) => e);
  assert.equal(retired.status, 409);
});
