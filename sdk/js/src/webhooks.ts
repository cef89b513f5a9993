/**
 * Verify RAM's webhooks (Standard Webhooks signatures) with WebCrypto: no dependency.
 *
 * RAM posts each event as JSON with `webhook-id` (the same at every attempt of one
 * event: de-duplicate on it), `webhook-timestamp` (Unix seconds of this attempt) and
 * `webhook-signature` (`v1,<base64>` HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed
 * with the `whsec_` secret; several, space-separated, while the secret rotates).
 * Verify the raw body before parsing it. For a trusted server: never ship a webhook
 * secret to a browser.
 */
import { RamSdkError } from './errors.js';

const SECRET_PREFIX = 'whsec_';
const DEFAULT_TOLERANCE_SECONDS = 300;
const encoder = new TextEncoder();

/** The request is not a webhook RAM signed with this secret, or it is too old or too new. */
export class WebhookVerificationError extends RamSdkError {
  override name = 'WebhookVerificationError';
}

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Now, in Unix seconds (default: the clock). */
  now?: number;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;
type Bytes = Uint8Array<ArrayBuffer>;

function keyBytes(secret: string): Bytes {
  if (typeof secret !== 'string' || !secret.startsWith(SECRET_PREFIX)) {
    throw new TypeError('A webhook secret is the whsec_ value RAM showed when the endpoint was created or rotated.');
  }
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new TypeError('The webhook secret is not whsec_ followed by base64.');
  return Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
}

function header(headers: HeaderBag, name: string): string {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? '';
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(' ') : (value ?? '');
  }
  return '';
}

function bytesOf(body: string | Uint8Array): Bytes {
  return typeof body === 'string' ? encoder.encode(body) : new Uint8Array(body);
}

async function hmac(key: Bytes, data: Bytes): Promise<Bytes> {
  const imported = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', imported, data));
}

function signedContent(messageId: string, timestamp: string | number, body: Bytes): Bytes {
  const prefix = encoder.encode(`${messageId}.${timestamp}.`);
  const all = new Uint8Array(prefix.length + body.length);
  all.set(prefix);
  all.set(body, prefix.length);
  return all;
}

function base64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i += 1) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/** The `v1,<base64>` signature of one webhook (what RAM sends; for tests of a receiver). */
export async function signWebhook(
  secret: string, messageId: string, timestamp: number, body: string | Uint8Array,
): Promise<string> {
  return `v1,${base64(await hmac(keyBytes(secret), signedContent(messageId, timestamp, bytesOf(body))))}`;
}

/**
 * The webhook's parsed JSON body when one of its signatures is by `secret` (or one of
 * several secrets); throws `WebhookVerificationError` otherwise.
 */
export async function verifyWebhook(
  secret: string | string[], body: string | Uint8Array, headers: HeaderBag, options: VerifyOptions = {},
): Promise<unknown> {
  const keys = (Array.isArray(secret) ? secret : [secret]).map(keyBytes);
  const raw = bytesOf(body);
  const messageId = header(headers, 'webhook-id');
  const stamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!messageId || !stamp || !signatures) {
    throw new WebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature.');
  }
  if (!/^[0-9]{1,12}$/.test(stamp)) throw new WebhookVerificationError('Invalid webhook-timestamp.');
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(stamp)) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError('The webhook-timestamp is too old or too new.');
  }
  const content = signedContent(messageId, stamp, raw);
  const expected = await Promise.all(keys.map((key) => hmac(key, content)));
  for (const candidate of signatures.split(' ')) {
    const [version, encoded] = candidate.split(',', 2);
    if (version !== 'v1' || !encoded || !/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) continue;
    const given = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
    if (expected.some((digest) => sameBytes(given, digest))) {
      try {
        return JSON.parse(new TextDecoder().decode(raw));
      } catch {
        throw new WebhookVerificationError('The signed body is not JSON.');
      }
    }
  }
  throw new WebhookVerificationError('No signature matches the secret.');
}
