import { RamError } from './errors.js';
import type { Credential } from './types.js';

export async function apiKey(credential: Credential): Promise<string> {
  if (typeof credential !== 'function') throw new TypeError('credential is a function that returns the API key.');
  const key = await credential();
  if (typeof key !== 'string' || !key) throw new TypeError('credential() must return the API key as a non-empty string.');
  return key;
}

/** The `RamError` of a refused answer (a redirect is never followed). */
export async function errorFrom(response: Response): Promise<RamError> {
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  const object = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
  let message = typeof object?.error === 'string' ? object.error : response.statusText || 'refused';
  if (response.status >= 300 && response.status < 400 || response.type === 'opaqueredirect') {
    message = 'The server answered with a redirect, which this client does not follow.';
  }
  return new RamError(response.status, message, object);
}
