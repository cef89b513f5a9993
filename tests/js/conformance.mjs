// Drive the spec's two examples against a live server:
//   node conformance.mjs observe <origin> <computerId>      (runner key on stdin)
//   node conformance.mjs control <origin> <computerId> <x> <y> <text>
// Prints one JSON line with what happened; exits non-zero on any failure.
import { WebSocket } from 'ws';
import { observeComputer } from './examples/observe.mjs';
import { bindHumanGestures } from './examples/gestures.mjs';

const [mode, origin, computerId, ...rest] = process.argv.slice(2);
const key = (await new Promise((resolve) => {
  let data = '';
  process.stdin.on('data', (chunk) => { data += chunk; });
  process.stdin.on('end', () => resolve(data.trim()));
}));
const fail = (why) => { console.log(JSON.stringify({ ok: false, why })); process.exit(1); };
setTimeout(() => fail('timeout'), 60000).unref();

function waitFor(check, what, ms = 20000) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (check()) return resolve();
      if (Date.now() - started > ms) return reject(new Error(`waiting for ${what}`));
      setTimeout(tick, 20);
    };
    tick();
  });
}

if (mode === 'observe') {
  const frames = [];
  let disconnected = false;
  const viewer = await observeComputer({
    baseUrl: origin + '/',
    computerId,
    credential: async () => key,
    renderJpeg: (jpeg, frame) => frames.push({ bytes: jpeg.byteLength, soi: jpeg[0] === 0xff && jpeg[1] === 0xd8, frame }),
    onDisconnect: () => { disconnected = true; },
  });
  await waitFor(() => frames.length >= 1 || disconnected, 'a frame');
  viewer.close();
  await waitFor(() => disconnected, 'close');
  console.log(JSON.stringify({ ok: frames.length >= 1, frames: frames.slice(0, 1) }));
} else if (mode === 'control') {
  const [x, y, text] = [Number(rest[0]), Number(rest[1]), rest[2]];
  // "socket is a ws already opened with a new ticket of a session with mode control"
  const response = await fetch(new URL('/api/visual/sessions', origin), {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'X-RAM-Intent': 'visual-session' },
    body: JSON.stringify({ computer_id: computerId, mode: 'control', transport: 'jpeg-websocket-v1' }),
  });
  if (response.status !== 201) fail(`session ${response.status}`);
  const session = await response.json();
  const url = new URL(session.websocket_path, origin);
  url.protocol = 'ws:';
  const socket = new WebSocket(url, [session.subprotocol, session.ticket_protocol_prefix + session.ticket]);
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); });
  const states = [];
  let frames = 0;
  let released = false;
  let acks = 0;
  socket.on('message', (data, binary) => {
    if (binary) return;
    const event = JSON.parse(data.toString());
    if (event.type === 'frame') frames += 1;
    if (event.type === 'ack') acks += 1;
    if (event.type === 'state' && event.control === 'released' && event.controlling === false) released = true;
  });
  const gestures = bindHumanGestures(socket, (state) => states.push(state), 20000);
  const last = () => states[states.length - 1] || {};
  await waitFor(() => frames >= 1, 'first frame');
  gestures.takeover();
  await waitFor(() => last().controlling === true, 'control');
  for (const input of [
    { type: 'pointer', phase: 'down', x, y, button: 'left' },
    { type: 'pointer', phase: 'up', x, y, button: 'left' },
    { type: 'text', text },
    { type: 'key', phase: 'down', key: 'Enter' },
    { type: 'key', phase: 'up', key: 'Enter' },
  ]) {
    const before = acks;
    gestures.input(input);
    await waitFor(() => acks > before && last().awaitingAck === false, 'ack');
  }
  gestures.release();
  await waitFor(() => released && last().controlling === false, 'released');
  const uncertain = states.some((s) => s.uncertain === true);
  socket.close();
  console.log(JSON.stringify({ ok: !uncertain, states: states.length }));
} else {
  fail('mode');
}
