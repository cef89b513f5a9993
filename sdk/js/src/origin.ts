import { UnsafeOrigin } from './errors.js';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The origin `scheme://host[:port]` of `baseUrl` when it is HTTPS, or plain HTTP on
 * local loopback; refuses credentials, a path other than `/`, a query and a fragment.
 */
export function checkedOrigin(baseUrl: string | URL): string {
  const raw = String(baseUrl);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeOrigin('Use an HTTPS origin or local loopback.');
  }
  if (
    url.username || url.password || raw.includes('?') || raw.includes('#') ||
    (url.pathname !== '/' && url.pathname !== '') || !url.hostname ||
    !(url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname)))
  ) {
    throw new UnsafeOrigin('Use an HTTPS origin or local loopback.');
  }
  return url.origin;
}
