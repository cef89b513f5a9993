// The credential journey through the TypeScript client against the live server:
// create, pause, descriptor, a person saves the credential in Chromium, continue
// exactly once with a replayed key, and the run logs in and finishes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidDescriptor, RamClient, RamError } from '../dist/index.js';
import { live } from './helpers.mjs';

const env = live();
const ram = new RamClient({ baseUrl: env.origin, credential: async () => env.key, timeoutMs: 30_000 });

test('the whole credential journey through the TypeScript client', async () => {
  const { computers } = await ram.computers.list();
  assert.deepEqual(computers.map((c) => [c.id, c.available]), [[env.computerId, true]]);
  const one = await ram.computers.get(env.computerId);
  assert.deepEqual([one.id, one.available, one.state], [env.computerId, true, 'ready']);

  const created = await ram.runs.create({
    task: {
      goal: "Read the portal's home page",
      steps: [
        { tool: 'navigate', arguments: { url: `${env.portal}/login/standard` } },
        { tool: 'request_credential', arguments: { portal_origin: env.portal, label: 'Acme portal', credential_id: 'acme' } },
        { tool: 'browser_login', arguments: { credentialId: 'acme' } },
        { tool: 'extract_text', arguments: {} },
      ],
    },
    computer_id: env.computerId,
    max_model_calls: 10,
  });
  assert.equal(created.status, 'running'); // the computer is free: the queue starts it at once
  assert.equal((await env.world('drive', { run_id: created.id })).pause_kind, 'credential');

  // The run and its required_action, through get and list.
  const paused = await ram.runs.get(created.id);
  assert.equal(paused.status, 'waiting_for_input');
  assert.equal(paused.required_action.kind, 'credential');
  assert.equal(paused.required_action.resume, 'explicit_continue');
  const page = await ram.runs.list({ kind: 'credential', limit: 5 });
  assert.deepEqual(page.runs.map((r) => r.id), [created.id]);

  // The checked descriptor: the locator on this origin, texts for the person, no capability.
  const intervention = await ram.interventionDescriptor(created.id);
  assert.equal(intervention.kind, 'credential');
  assert.equal(intervention.state, 'pending');
  assert.equal(intervention.request_id, paused.required_action.request_id);
  assert.deepEqual(intervention.human_action, { url: `${env.origin}/tasks/${created.id}/intervention`, requires_login: true });
  for (const text of [intervention.progress, intervention.user_action, intervention.next_step]) assert.ok(text.trim());
  const legacy = await ram.intervention(created.id);
  assert.equal(legacy.invite, null);
  assert.deepEqual(legacy.intervention, intervention);
  const viewer = await ram.viewer(created.id);
  assert.equal(viewer.url, `${env.origin}/view?computer_id=${env.computerId}`);

  // The person opens the locator in Chromium, signs in, and saves the credential in the Vault form.
  await env.world('person/save-credential', { url: intervention.human_action.url });
  const saved = await ram.interventionDescriptor(created.id);
  assert.equal(saved.state, 'credential_saved');
  assert.equal((await ram.runs.get(created.id)).required_action.kind, 'credential');

  // Continue exactly once: the same key replays the first answer; another key is a conflict.
  const key = `continue-${created.id}`;
  const first = await ram.runs.continue(created.id, { idempotencyKey: key });
  assert.equal(first.continued_from, created.id);
  assert.deepEqual(await ram.runs.continue(created.id, { idempotencyKey: key }), first);
  const conflict = await ram.runs.continue(created.id, { idempotencyKey: `${key}-again` }).catch((e) => e);
  assert.ok(conflict instanceof RamError);
  assert.equal(conflict.status, 409);
  assert.equal(conflict.body.continued_run_id, first.run.id);
  const reused = await ram.runs.continue(created.id, { idempotencyKey: key.replace('continue', 'another') }).catch((e) => e);
  assert.equal(reused.status, 409);
  assert.equal('required_action' in (await ram.runs.get(created.id)), false);
  await assert.rejects(ram.interventionDescriptor(created.id), (e) => e instanceof RamError && e.status === 409);

  // The continuation logs in with the saved credential (once) and finishes.
  const done = await env.world('drive', { run_id: first.run.id });
  assert.equal(done.status, 'succeeded');
  const finished = await ram.runs.get(first.run.id);
  assert.match(JSON.stringify(finished.result), /Welcome back/);
  assert.equal((await env.world('portal/posts')).count, 1);
});

test('refusals are typed RamError with the status and the server\'s error text', async () => {
  const missing = await ram.runs.get('00000000-0000-4000-8000-000000000000').catch((e) => e);
  assert.ok(missing instanceof RamError);
  assert.equal(missing.status, 404);
  assert.equal(missing.error, 'No such run.');

  const invalid = await ram.runs.create({ task: { goal: '' }, computer_id: env.computerId }).catch((e) => e);
  assert.equal(invalid.status, 400);
  assert.match(invalid.error, /^Invalid request: task\.goal/);

  const observer = new RamClient({ baseUrl: env.origin, credential: () => env.observerKey });
  const { runs } = await observer.runs.list({ limit: 1 });
  assert.equal(runs.length, 1);
  const forbidden = await observer.interventionDescriptor(runs[0].id).catch((e) => e);
  assert.equal(forbidden.status, 403);
  assert.ok(!String(forbidden).includes(env.observerKey) && !String(observer).includes(env.observerKey));

  const stranger = new RamClient({ baseUrl: env.origin, credential: () => `ram_rk_000000000000_${'A'.repeat(43)}` });
  const unauthorised = await stranger.computers.list().catch((e) => e);
  assert.equal(unauthorised.status, 401);
  assert.ok(!unauthorised.message.includes('AAAA'));
});

test('a run is cancelled and its intervention becomes unavailable', async () => {
  const created = await ram.runs.create({
    task: { goal: 'Wait for a person', steps: [{ tool: 'request_takeover', arguments: { reason: 'verification' } }] },
    computer_id: env.computerId,
  });
  assert.equal((await env.world('drive', { run_id: created.id })).pause_kind, 'takeover');
  const intervention = await ram.interventionDescriptor(created.id);
  assert.equal(intervention.kind, 'human_control');
  assert.equal((await ram.runs.cancel(created.id)).status, 'cancelled');
  await assert.rejects(ram.interventionDescriptor(created.id), (e) => e instanceof RamError && e.status === 409);
});

test('a descriptor answer that fails the checks is never returned', async () => {
  // A client configured with another origin than the server's: every locator is foreign to it.
  const created = await ram.runs.create({
    task: { goal: 'Wait for a person', steps: [{ tool: 'request_takeover', arguments: { reason: 'captcha' } }] },
    computer_id: env.computerId,
  });
  await env.world('drive', { run_id: created.id });
  const elsewhere = new RamClient({ baseUrl: env.origin.replace('127.0.0.1', 'localhost'), credential: () => env.key });
  await assert.rejects(elsewhere.interventionDescriptor(created.id), InvalidDescriptor);
  await ram.runs.cancel(created.id);
});
