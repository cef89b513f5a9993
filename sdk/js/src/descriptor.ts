/**
 * The intervention descriptor check: what the spec's presentation code checks
 * (the run binding, `requires_login` exactly `true`, an absolute locator on the
 * configured origin with exactly the path `/tasks/<run_id>/intervention`, no
 * query or fragment) and the descriptor contract (closed objects, `version` 1,
 * the enums, the texts, the per-kind `request_id`/`expires_at` rules).
 */
import { InvalidDescriptor } from './errors.js';
import type { InterventionDescriptor } from './types.js';

const FIELDS = new Set([
  'version', 'run_id', 'computer_id', 'kind', 'state', 'reason', 'progress', 'user_action', 'next_step',
  'request_id', 'expires_at', 'human_action',
]);
const KINDS = ['human_control', 'credential', 'google_connection'];
const STATES = ['pending', 'credential_saved'];
const REASONS = ['authentication', 'captcha', 'verification', 'missing_information', 'authorization_required', 'other'];
const COMPUTER_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
// ISO 8601 with a time and a time zone (the request's real deadline).
const AWARE_ISO = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:[0-9]{2})$/;
// No link, invite, ticket, Bearer value or API key in a text shown to a person.
const FORBIDDEN_IN_TEXT = /https?:|#\s*invite|invite\s*=|ram-ticket\.|\bticket\s*[=:]|bearer|ram_(?:rk|ok)_/i;
const URL_PREFIX = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\\s]+$/;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function keysAre(value: Record<string, unknown>, expected: string[]): boolean {
  const keys = Object.keys(value);
  return keys.length === expected.length && expected.every((k) => Object.hasOwn(value, k));
}

function isText(value: unknown): boolean {
  // JavaScript's length is the number of UTF-16 code units: the contract's unit.
  return typeof value === 'string' && value.trim() !== '' && value.length <= 500 && !FORBIDDEN_IN_TEXT.test(value);
}

function isAwareIso(value: unknown): boolean {
  return typeof value === 'string' && AWARE_ISO.test(value) && !Number.isNaN(Date.parse(value));
}

/** `human_action.url` is exactly `<origin>/tasks/<runId>/intervention`, absolute, with nothing else. */
function isLocator(url: string, runId: string, origin: string): boolean {
  const path = `/tasks/${runId}/intervention`;
  if (!url.endsWith(path)) return false;
  const prefix = url.slice(0, -path.length);
  if (!URL_PREFIX.test(prefix)) return false;
  try {
    const parsed = new URL(prefix);
    return !parsed.username && !parsed.password && parsed.origin === origin;
  } catch {
    return false;
  }
}

/**
 * Validate a descriptor answer `{intervention: {...}}` for `runId` on `origin`
 * (as `checkedOrigin` returns it). Returns the `intervention` object; throws
 * `InvalidDescriptor` otherwise: then show nothing to anyone.
 */
export function checkIntervention(data: unknown, { runId, origin }: { runId: string; origin: string }): InterventionDescriptor {
  if (!isPlainObject(data) || !keysAre(data, ['intervention']) || !isPlainObject(data.intervention)) {
    throw new InvalidDescriptor('Invalid link: the response is not {intervention: object}.');
  }
  const item = data.intervention;
  const action = item.human_action;
  if (item.run_id !== runId) throw new InvalidDescriptor('Invalid link: the descriptor is for another run.');
  if (!isPlainObject(action) || !keysAre(action, ['url', 'requires_login']) || action.requires_login !== true) {
    throw new InvalidDescriptor('Invalid link: human_action must be {url, requires_login: true}.');
  }
  if (typeof action.url !== 'string') throw new InvalidDescriptor('Invalid link: human_action.url is not a string.');
  if (!isLocator(action.url, runId, origin)) {
    throw new InvalidDescriptor("Invalid link: the locator is not this server's intervention page for the run.");
  }
  const problems: string[] = [];
  if (Object.keys(item).some((k) => !FIELDS.has(k))) problems.push('unknown fields');
  if (item.version !== 1) problems.push('version');
  if (typeof item.run_id !== 'string' || !UUID.test(item.run_id)) problems.push('run_id');
  if (typeof item.computer_id !== 'string' || !COMPUTER_ID.test(item.computer_id)) problems.push('computer_id');
  const { kind, state } = item;
  if (!KINDS.includes(kind as string)) problems.push('kind');
  if (!STATES.includes(state as string)) problems.push('state');
  if (!REASONS.includes(item.reason as string)) problems.push('reason');
  for (const name of ['progress', 'user_action', 'next_step']) if (!isText(item[name])) problems.push(name);
  if (kind === 'credential') {
    if (typeof item.request_id !== 'string' || !UUID.test(item.request_id) || !isAwareIso(item.expires_at)) {
      problems.push('request_id/expires_at');
    }
  } else if (kind === 'human_control' || kind === 'google_connection') {
    if (state !== 'pending' || Object.hasOwn(item, 'expires_at')) problems.push('state/expires_at');
    if (kind === 'human_control' && Object.hasOwn(item, 'request_id')) problems.push('request_id');
    if (kind === 'google_connection' && item.request_id !== runId) problems.push('request_id');
  }
  if (problems.length) throw new InvalidDescriptor(`Invalid descriptor: ${problems.join(', ')}.`);
  return item as unknown as InterventionDescriptor;
}
