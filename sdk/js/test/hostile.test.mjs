// The client against a hostile server on loopback (Node's http and ws): redirects are not
// followed, refusals and broken answers are typed errors, and a stream that breaks the
// protocol is closed once, never reconnected, with no input ever resent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';
import {
  bindHumanGestures, ControlError, InvalidDescriptor, observeComputer, openVisualStream, RamClient, RamError,
  RequestFailed,
} from '../dist/index.js';
import { waitFor } from './helpers.mjs';

const RUN = '11111111-1111-4111-8111-111111111111';
const GEN_A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
const GEN_B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xd9]);
const frame = (changes = {}) => JSON.stringify({
  type: 'frame', sequence: 1, generation: GEN_A, mime_type: 'image/jpeg', width: 1280, height: 720,
  control: 'available', controlling: false, url: 'about:blank', ...changes,
});
const human = JSON.stringify({ type: 'state', control: 'human', controlling: true, stopped_processes: 0, cancelled_downloads: 0, aborted_exports: 0 });

const world = { answer: null, requests: [], sockets: 0, script: [], later: [], received: [], grantOnTakeover: false, ack: true };
let server;
let origin;

before(async () => {
  server = createServer((request, response) => {
    world.requests.push(`${request.method} ${request.url}`);
    if (request.url === '/api/visual/sessions') {
      response.writeHead(201, { 'content-type': 'application/json' });
      const mode = world.mode ?? 'observe';
      return response.end(JSON.stringify({
        version: 1, transport: 'jpeg-websocket-v1', session_id: RUN, ticket: 'T'.repeat(43),
        websocket_path: '/api/visual/stream', subprotocol: 'ram-jpeg-v1', ticket_protocol_prefix: 'ram-ticket.',
        connect_expires_in_seconds: 60, session_max_seconds: 900, max_fps: 4, viewport: { width: 1280, height: 720 }, mode,
      }));
    }
    const { status = 200, headers = { 'content-type': 'application/json' }, body = '', hang = false } = world.answer ?? {};
    if (hang) return;
    response.writeHead(status, headers);
    response.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  const sockets = new WebSocketServer({ server, handleProtocols: () => 'ram-jpeg-v1' });
  sockets.on('connection', (socket) => {
    world.sockets += 1;
    for (const message of world.script) socket.send(message, { binary: Buffer.isBuffer(message) });
    setTimeout(() => { for (const message of world.later) socket.send(message); }, 300);
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString());
      world.received.push(message);
      if (message.type === 'takeover' && world.grantOnTakeover) {
        socket.send(JSON.stringify({ type: 'state', control: 'transition' }));
        socket.send(human);
      }
      if (message.type === 'input' && world.ack) socket.send(JSON.stringify({ type: 'ack', sequence: message.sequence }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
});

after(() => { server.closeAllConnections(); server.close(); });

const reset = (changes = {}) => Object.assign(world, {
  answer: null, requests: [], sockets: 0, script: [], later: [], received: [], grantOnTakeover: false, ack: true, mode: 'observe',
}, changes);
const client = (timeoutMs = 5000) => new RamClient({ baseUrl: origin, credential: () => 'ram_rk_0_unused', timeoutMs });

test('a redirect is a RamError and is not followed', async () => {
  reset({ answer: { status: 302, headers: { location: `${origin}/elsewhere` }, body: '' } });
  const error = await client().runs.get(RUN).catch((e) => e);
  assert.ok(error instanceof RamError);
  assert.equal(error.status, 302);
  assert.match(error.error, /redirect/);
  assert.deepEqual(world.requests, [`GET /api/runs/${RUN}`]);
});

test('a refusal carries the status, the server\'s error text and the body', async () => {
  reset({ answer: { status: 409, body: { error: 'The run was already continued.', continued_run_id: RUN } } });
  const error = await client().runs.continue(RUN, { idempotencyKey: 'key-12345' }).catch((e) => e);
  assert.ok(error instanceof RamError);
  assert.deepEqual([error.status, error.error, error.body.continued_run_id], [409, 'The run was already continued.', RUN]);
  assert.equal(error.message, 'HTTP 409: The run was already continued.');
});

test('an answer that is not JSON and a missing answer are typed errors', async () => {
  reset({ answer: { status: 200, headers: { 'content-type': 'text/html' }, body: '<html>' } });
  const broken = await client().computers.list().catch((e) => e);
  assert.ok(broken instanceof RamError);
  assert.equal(broken.error, "The server's answer is not JSON.");
  reset({ answer: { hang: true } });
  const silent = await client(200).runs.list().catch((e) => e);
  assert.ok(silent instanceof RequestFailed);
  assert.ok(!String(silent).includes('ram_rk_'));
});

test('a descriptor with a relative locator is refused', async () => {
  const intervention = {
    version: 1, run_id: RUN, computer_id: 'pc-1', kind: 'human_control', state: 'pending', reason: 'captcha',
    progress: 'The task paused.', user_action: 'Solve the challenge.', next_step: 'Hand control back.',
    human_action: { url: `${origin}/tasks/${RUN}/intervention`, requires_login: true },
  };
  reset({ answer: { body: { intervention } } });
  assert.deepEqual(await client().interventionDescriptor(RUN.toUpperCase()), intervention);
  reset({ answer: { body: { intervention: { ...intervention, human_action: { url: `/tasks/${RUN}/intervention`, requires_login: true } } } } });
  await assert.rejects(client().interventionDescriptor(RUN), InvalidDescriptor);
});

async function observe(script) {
  reset({ script });
  const images = [];
  const disconnects = [];
  const stream = await observeComputer({
    baseUrl: origin, computerId: 'pc-1', credential: () => 'ram_rk_0_unused',
    renderJpeg: (jpeg, meta) => images.push(meta), onDisconnect: (reason) => disconnects.push(reason), timeoutMs: 5000,
  });
  const reason = await stream.ended;
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(disconnects, [reason]);
  assert.equal(world.sockets, 1); // never reconnected
  assert.equal(world.requests.filter((r) => r.startsWith('POST /api/visual/sessions')).length, 1);
  return { images, reason };
}

test('a stream that breaks the protocol is closed once and never reconnected', async () => {
  const over = Buffer.alloc(2_000_001, 0);
  const cases = [
    [[frame(), JPEG, JPEG], 1, 'JPEG without metadata.'],
    [[JPEG], 0, 'JPEG without metadata.'],
    [[frame(), JPEG, frame({ generation: GEN_B }), JPEG], 1, 'Observe the current generation again.'],
    [[frame({ mime_type: 'image/png' }), JPEG], 0, 'The server sent a message outside the jpeg-websocket-v1 contract.'],
    [[frame({ jpeg: 'base64' }), JPEG], 0, 'The server sent a message outside the jpeg-websocket-v1 contract.'],
    [[frame(), over], 0, 'Frame exceeds the limit.'],
    [[frame(), JPEG, JSON.stringify({ type: 'error', message: 'Computer restarted; reconnect.' })], 1, 'Computer restarted; reconnect.'],
    [['not json'], 0, undefined],
  ];
  for (const [script, rendered, reason] of cases) {
    const result = await observe(script);
    assert.equal(result.images.length, rendered, reason);
    if (reason) assert.equal(result.reason, reason);
  }
});

test('an input without an ack ends control as uncertain and is sent exactly once', async () => {
  reset({ script: [frame(), JPEG], grantOnTakeover: true, ack: false, mode: 'control' });
  const stream = await openVisualStream({
    baseUrl: origin, computerId: 'pc-1', credential: () => 'ram_rk_0_unused', mode: 'control', renderJpeg: () => {}, timeoutMs: 5000,
  });
  const states = [];
  const gestures = bindHumanGestures(stream, (state) => states.push(state), 300);
  await stream.firstFrame(5000);
  await gestures.takeover();
  await assert.rejects(gestures.input({ type: 'text', text: 'secret-ish' }), ControlError);
  assert.deepEqual(states.at(-1), { controlling: false, uncertain: true });
  assert.equal(stream.closed, true);
  await assert.rejects(gestures.input({ type: 'text', text: 'again' }), ControlError);
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual(world.received.map((m) => m.type), ['takeover', 'input']);
  assert.equal(world.sockets, 1);
});

test('a grant nobody asked for closes the stream', async () => {
  reset({ script: [frame(), JPEG], later: [human], mode: 'control' });
  const stream = await openVisualStream({
    baseUrl: origin, computerId: 'pc-1', credential: () => 'ram_rk_0_unused', mode: 'control', renderJpeg: () => {}, timeoutMs: 5000,
  });
  const states = [];
  bindHumanGestures(stream, (state) => states.push(state), 1000);
  await waitFor(() => stream.closed, 'close', 5000);
  assert.equal(stream.closeReason, 'unexpected grant');
  assert.deepEqual(world.received, []);
});
