// Bring your own agent and what happened, through the TypeScript client against the live server:
// act and observe on an external run, then its steps, events and masked screenshots.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RamClient, RamError, RunHandle } from '../dist/index.js';
import { live } from './helpers.mjs';

const env = live();
const ram = new RamClient({ baseUrl: env.origin, credential: async () => env.key, timeoutMs: 30_000 });
const observer = new RamClient({ baseUrl: env.origin, credential: () => env.observerKey, timeoutMs: 30_000 });
const SECRET = 'Typed-Secret-9z';
const FORM = '<title>Form</title><body><h1>Sign in</h1><input id=note><input id=pw type=password></body>';
const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const SLOW = '<title>Slow</title><body><h1>Waiting</h1><script>setTimeout(() => { const p = document.createElement("p");'
  + ' p.id = "late"; p.textContent = "Arrived"; document.body.append(p); }, 3000)</script></body>';

test('an external run acts, observes, and reads its steps, events and masked screenshots', async () => {
  await env.world('screen/page', { html: FORM });
  const run = await ram.runs.create({ task: { goal: 'Fill the form' }, computer_id: env.computerId, agent: { type: 'external' } });

  const typed = await ram.runs.act(run.id, { tool: 'type', arguments: { selector: '#pw', text: SECRET }, idempotencyKey: `type-${run.id}` });
  assert.equal(typed.state, 'succeeded');
  assert.equal(typed.result.isError, false);
  // The same key answers the first step and never types twice.
  assert.deepEqual(await ram.runs.act(run.id, { tool: 'type', arguments: { selector: '#pw', text: SECRET }, idempotencyKey: `type-${run.id}` }), typed);
  assert.deepEqual(await ram.runs.action(run.id, typed.step_id, { wait: 0 }), typed);
  const shot = await ram.runs.act(run.id, { tool: 'screenshot', idempotencyKey: `shot-${run.id}` });
  const artifactId = shot.result.artifact_id;
  assert.match(artifactId, /^[0-9a-f-]{36}$/);

  const seen = await ram.runs.observe(run.id);
  assert.equal(seen.title, 'Form');
  assert.match(seen.text, /Sign in/);
  assert.equal(seen.screenshot_artifact_id, artifactId);

  const png = await ram.artifacts.get(artifactId);
  assert.ok(png instanceof Uint8Array && png.length > 1000);
  assert.deepEqual([...png.slice(0, 8)], PNG);
  const typedPng = await ram.artifacts.get(typed.result.artifact_id);
  assert.deepEqual([...typedPng.slice(0, 8)], PNG);

  // Steps: secret-free arguments (the typed text's length only), states, artifact ids; pages by index.
  const { steps, next_after } = await ram.runs.steps(run.id);
  assert.equal(next_after, null);
  assert.deepEqual(steps.map((s) => [s.index, s.tool, s.state]), [[0, 'type', 'succeeded'], [1, 'screenshot', 'succeeded']]);
  assert.deepEqual(steps[0].arguments, { selector: '#pw', characters: SECRET.length });
  assert.deepEqual(steps[1].artifact_ids, [artifactId]);
  assert.ok(steps.every((s) => Date.parse(s.started_at) <= Date.parse(s.finished_at)));
  const second = await ram.runs.steps(run.id, { after: 0, limit: 1 });
  assert.deepEqual(second.steps.map((s) => s.tool), ['screenshot']);

  // Events: oldest first, the after cursor gives only newer ones; a task_observer key reads them too.
  const { events } = await observer.runs.events(run.id);
  assert.deepEqual(events.slice(0, 3).map((e) => e.kind), ['run_created', 'run_queued', 'run_started']);
  const last = events.at(-1).id;
  assert.deepEqual((await ram.runs.events(run.id, { after: last })).events, []);
  const firstTwo = await ram.runs.events(run.id, { limit: 2 });
  assert.equal(firstTwo.next_after, events[1].id);
  assert.ok(!JSON.stringify([steps, events]).includes(SECRET));

  // A task_observer key has no visual access; an unknown artifact is not found.
  await assert.rejects(observer.artifacts.get(artifactId), (error) => error instanceof RamError && error.status === 403);
  await assert.rejects(ram.artifacts.get('00000000-0000-4000-8000-000000000000'), (error) => error instanceof RamError && error.status === 404);
  await assert.rejects(ram.artifacts.get('../etc'), TypeError);
  await assert.rejects(ram.runs.act(run.id, { tool: 'finish', idempotencyKey: 'short' }), TypeError);
  await assert.rejects(ram.runs.steps(run.id, { after: -1 }), TypeError);

  const finished = await ram.runs.act(run.id, { tool: 'finish', arguments: { output: 'done' }, idempotencyKey: `finish-${run.id}` });
  assert.equal(finished.run_status, 'succeeded');

  // Its recording: WebM segments masked at the source, and the steps on its timeline (runner keys only).
  let timeline;
  for (let i = 0; i < 150 && !timeline?.recording.ended_at; i++) {
    try {
      timeline = await ram.runs.recordingTimeline(run.id);
    } catch (error) {
      if (!(error instanceof RamError && error.status === 404)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  assert.ok(timeline?.recording.ended_at, 'the recording ended with the run');
  assert.deepEqual(timeline.entries.filter((e) => e.type === 'step').map((e) => e.detail.tool), ['type', 'screenshot', 'finish']);
  const webm = await ram.runs.recording(run.id, { segment: timeline.recording.segments[0].index });
  assert.deepEqual([...webm.slice(0, 4)], [0x1a, 0x45, 0xdf, 0xa3]);
  assert.ok(!JSON.stringify(timeline).includes(SECRET));
  await assert.rejects(observer.runs.recordingTimeline(run.id), (error) => error instanceof RamError && error.status === 403);
  await assert.rejects(ram.runs.recording(run.id, { segment: -1 }), TypeError);
});

test('a file uploaded for the upload tool comes back byte for byte; a refused one changes nothing', async () => {
  const pdf = new TextEncoder().encode('%PDF-1.4\n%%EOF\n');
  const uploaded = await ram.artifacts.upload(pdf, { filename: 'statement.pdf', contentType: 'application/pdf' });
  assert.equal(uploaded.kind, 'upload');
  assert.equal(uploaded.filename, 'statement.pdf');
  assert.equal(uploaded.size, pdf.length);
  assert.match(uploaded.sha256, /^[0-9a-f]{64}$/);
  assert.deepEqual([...(await ram.artifacts.get(uploaded.id))], [...pdf]);
  await assert.rejects(
    ram.artifacts.upload(new Uint8Array([0x4d, 0x5a]), { filename: 'tool.exe', contentType: 'application/x-msdownload' }),
    (error) => error instanceof RamError && error.status === 415,
  );
  await assert.rejects(observer.artifacts.upload(pdf, { filename: 'a.pdf', contentType: 'application/pdf' }), (error) => error instanceof RamError && error.status === 403);
  await assert.rejects(ram.artifacts.upload(pdf, { filename: '../a.pdf', contentType: 'application/pdf' }), TypeError);
});

test('a run handle acts until its step settled (after a 202), observes, and never runs an action twice', async () => {
  const { previous } = await env.world('settings/action-wait', { seconds: 1 });
  try {
    const created = await ram.runs.create({ task: { goal: 'Wait for the page' }, computer_id: env.computerId, agent: { type: 'external' } });
    const run = ram.run(created.id);
    assert.ok(run instanceof RunHandle);
    assert.equal(run.id, created.id);
    assert.equal((await run.get()).status, 'running');
    await env.world('screen/page', { html: SLOW });
    assert.equal((await run.observe()).title, 'Slow');
    // The element appears about 3 s later: the server answers 202 after its 1 s wait...
    const wait = { selector: '#late', timeout_ms: 15_000 };
    const key = `wait-${run.id}`;
    const first = await ram.runs.act(run.id, { tool: 'wait_for', arguments: wait, idempotencyKey: key });
    assert.equal(first.state, 'started');
    // ...and the handle, given the same key, reads that step until it settled: no second execution.
    const settled = await run.act('wait_for', { arguments: wait, idempotencyKey: key });
    assert.equal(settled.step_id, first.step_id);
    assert.equal(settled.state, 'succeeded');
    assert.equal(settled.result.isError, false);
    assert.match((await run.observe()).text, /Arrived/);
    assert.deepEqual((await ram.runs.steps(run.id)).steps.map((s) => [s.tool, s.state]), [['wait_for', 'succeeded']]);
    // Without a key, each call is a new action with a fresh one.
    const finished = await run.act('finish', { arguments: { output: 'arrived' } });
    assert.equal(finished.run_status, 'succeeded');
    assert.notEqual(finished.step_id, settled.step_id);
    await assert.rejects(run.act('finish'), (error) => error instanceof RamError && error.status === 409);
    assert.throws(() => ram.run('not-a-run'), TypeError);
  } finally {
    await env.world('settings/action-wait', { seconds: previous });
  }
});
