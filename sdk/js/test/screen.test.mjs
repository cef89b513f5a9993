// The screen helpers against the real gateway: frames, takeover, acknowledged inputs
// and release; a ticket works once; an invalid input is never sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bindHumanGestures, connectVisualSession, ControlError, observeComputer, openVisualStream, RamClient, VisualError,
} from '../dist/index.js';
import { live, waitFor } from './helpers.mjs';

const env = live();
const credential = () => env.key;
const ram = new RamClient({ baseUrl: env.origin, credential });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PAGE = `<!doctype html><title>t</title>
<style>body{margin:0} #t{position:absolute;left:400px;top:300px;width:300px;height:40px}</style>
<form onsubmit="event.preventDefault(); document.body.dataset.sent = document.getElementById('t').value">
<input id="t" autocomplete="off"></form>`;

test('observeComputer renders JPEG frames of the current generation and never reconnects', async () => {
  await env.world('screen/page', { html: PAGE });
  const images = [];
  const disconnects = [];
  const stream = await observeComputer({
    baseUrl: env.origin,
    computerId: env.computerId,
    credential,
    renderJpeg: (jpeg, frame) => images.push({ jpeg, frame }),
    onDisconnect: (reason) => disconnects.push(reason),
    timeoutMs: 15_000,
  });
  assert.equal(stream.mode, 'observe');
  await stream.firstFrame(15_000);
  const [{ jpeg, frame }] = images;
  assert.deepEqual([jpeg[0], jpeg[1]], [0xff, 0xd8]);
  assert.match(frame.generation, UUID);
  assert.equal(stream.generation, frame.generation);
  assert.deepEqual([frame.width, frame.height, frame.mime_type], [1280, 720, 'image/jpeg']);
  // An observe session cannot take control.
  assert.throws(() => bindHumanGestures(stream, () => {}, 1000), ControlError);
  stream.close();
  assert.equal(await stream.ended, 'closed by the client');
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(disconnects, ['closed by the client']);
});

test('bindHumanGestures takes control, sends acknowledged inputs and releases', async () => {
  await env.world('screen/page', { html: PAGE });
  const stream = await openVisualStream({
    baseUrl: env.origin, computerId: env.computerId, credential, mode: 'control', renderJpeg: () => {}, timeoutMs: 15_000,
  });
  const sent = [];
  const originalSend = stream.sendJson.bind(stream);
  stream.sendJson = (message) => { sent.push(message); originalSend(message); };
  const states = [];
  const gestures = bindHumanGestures(stream, (state) => states.push(state), 20_000);
  await stream.firstFrame(15_000);
  // Nothing is sent before the person's gesture; input before control is refused.
  await assert.rejects(gestures.input({ type: 'text', text: 'x' }), ControlError);
  assert.deepEqual(sent, []);
  await gestures.takeover();
  assert.equal(gestures.controlling, true);
  // An input outside the contract is refused before it is sent.
  await assert.rejects(gestures.input({ type: 'click', x: 1, y: 1 }), ControlError);
  for (const input of [
    { type: 'pointer', phase: 'down', x: 500, y: 320, button: 'left' },
    { type: 'pointer', phase: 'up', x: 500, y: 320, button: 'left' },
    { type: 'text', text: 'Olá' },
    { type: 'key', phase: 'down', key: 'Enter' },
    { type: 'key', phase: 'up', key: 'Enter' },
  ]) {
    await gestures.input(input);
  }
  await gestures.release();
  assert.equal(gestures.controlling, false);
  assert.deepEqual(sent.map((m) => m.type === 'input' ? m.sequence : m.type), ['takeover', 1, 2, 3, 4, 5, 'release']);
  const { value, control } = await env.world('screen/read', { expression: 'document.body.dataset.sent' });
  assert.equal(value, 'Olá');
  assert.equal(control, 'released');
  assert.ok(states.some((s) => s.controlling === true));
  assert.ok(!states.some((s) => s.uncertain === true));
  stream.close();
  await stream.ended;
});

test('a ticket works once: a second connection with the same session is refused', async () => {
  const session = await ram.visualSessions.create({ computerId: env.computerId, mode: 'observe' });
  assert.equal(session.connect_expires_in_seconds, 60);
  assert.match(session.ticket, /^[A-Za-z0-9_-]{43}$/);
  const first = await connectVisualSession(env.origin, session, { renderJpeg: () => {} }, 15_000);
  await first.firstFrame(15_000);
  first.close();
  // The SDK refuses to use the same session twice, before anything is sent…
  await assert.rejects(connectVisualSession(env.origin, session, { renderJpeg: () => {} }, 15_000), /already used/);
  // …and the gateway refuses a copy of it: the ticket was consumed.
  await assert.rejects(connectVisualSession(env.origin, { ...session }, { renderJpeg: () => {} }, 15_000), (error) => {
    assert.ok(error instanceof VisualError);
    assert.match(error.message, /HTTP 401/);
    assert.ok(!error.message.includes(session.ticket));
    return true;
  });
});

test('an unanswered input ends control as uncertain and is never resent', async () => {
  await env.world('screen/page', { html: PAGE });
  const stream = await openVisualStream({
    baseUrl: env.origin, computerId: env.computerId, credential, mode: 'control', renderJpeg: () => {}, timeoutMs: 15_000,
  });
  const states = [];
  const gestures = bindHumanGestures(stream, (state) => states.push(state), 20_000);
  await stream.firstFrame(15_000);
  await gestures.takeover();
  // The socket drops while the input is in flight: the call rejects, nothing is retried.
  const pending = gestures.input({ type: 'navigate', url: 'http://127.0.0.1:9/never' });
  stream.close('the network dropped');
  await assert.rejects(pending, ControlError);
  assert.deepEqual(states.at(-1), { controlling: false, uncertain: true });
  await assert.rejects(gestures.input({ type: 'text', text: 'x' }), ControlError);
  await assert.rejects(gestures.takeover(), ControlError);
  await waitFor(() => true, 'nothing');
});

test('visualSessions.create is refused with a typed error for a computer that is not yours', async () => {
  const refused = await ram.visualSessions.create({ computerId: 'not-mine', mode: 'observe' }).catch((e) => e);
  assert.equal(refused.status, 409);
  assert.equal(typeof refused.error, 'string');
});
