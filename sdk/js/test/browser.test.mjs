// `@ram/sdk/browser` offers only the screen helpers: it loads neither `ws` nor a Node
// module, has no REST client, and refuses an API key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as browser from '../dist/browser.js';

const DIST = new URL('../dist/', import.meta.url);

function importsOf(file, seen = new Set()) {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(new URL(file, DIST), 'utf8');
  for (const [, spec] of text.matchAll(/(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
    if (spec.startsWith('./')) importsOf(spec.slice(2), seen);
    else seen.add(spec);
  }
  return seen;
}

test('the browser entry loads only its own modules', () => {
  const loaded = [...importsOf('browser.js')];
  assert.ok(loaded.includes('screen.js') && loaded.includes('messages.js'));
  assert.deepEqual(loaded.filter((m) => !m.endsWith('.js') || m.startsWith('node:') || m === 'ws'), []);
  assert.ok(!loaded.includes('client.js') && !loaded.includes('node-screen.js') && !loaded.includes('http.js'));
});

test('the browser entry has no REST client and refuses an API key', async () => {
  assert.equal(browser.RamClient, undefined);
  assert.equal(browser.observeComputer, undefined);
  assert.equal(typeof browser.openScreen, 'function');
  assert.equal(typeof browser.bindHumanGestures, 'function');
  for (const name of ['credential', 'apiKey', 'key', 'authorization']) {
    await assert.rejects(browser.openScreen({ origin: 'https://ram.example', session: {}, [name]: 'ram_rk_x', renderJpeg() {} }), TypeError);
  }
  // A session that is not a jpeg-websocket-v1 answer is refused before any connection.
  await assert.rejects(browser.openScreen({ origin: 'https://ram.example', session: { ticket: 'x' }, renderJpeg() {} }), browser.VisualError);
});

test('the package maps browsers to the browser entry', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.exports['.'].browser.default, './dist/browser.js');
  assert.equal(pkg.exports['.'].default.default, './dist/index.js');
  assert.deepEqual(Object.keys(pkg.dependencies), ['ws']);
});
