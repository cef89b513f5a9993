// Shared by the tests: the live server the pytest suite started, and its "world" endpoint.
import { readFileSync } from 'node:fs';

export const CONTRACTS = new URL('../../../tests/contracts/', import.meta.url);

export function table(name) {
  return JSON.parse(readFileSync(new URL(name, CONTRACTS), 'utf8'));
}

/** The live server's settings; the live tests fail (not skip) without them. */
export function live() {
  const { RAM_TEST_URL, RAM_TEST_KEY, RAM_TEST_OBSERVER_KEY, RAM_TEST_WORLD, RAM_TEST_COMPUTER, RAM_TEST_PORTAL } = process.env;
  if (!RAM_TEST_URL || !RAM_TEST_KEY || !RAM_TEST_WORLD) {
    throw new Error('Run these tests through pytest (tests/e2e/test_js_sdk.py), which starts the server.');
  }
  return {
    origin: RAM_TEST_URL,
    key: RAM_TEST_KEY,
    observerKey: RAM_TEST_OBSERVER_KEY,
    computerId: RAM_TEST_COMPUTER,
    portal: RAM_TEST_PORTAL,
    async world(name, body = {}) {
      const response = await fetch(new URL(`/${name}`, RAM_TEST_WORLD), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(120_000),
      });
      const answer = await response.json();
      if (!response.ok) throw new Error(`world ${name}: ${answer.error}`);
      return answer;
    },
  };
}

export function waitFor(check, what, ms = 20_000) {
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
