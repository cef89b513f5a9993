/**
 * The screen in Node: a visual session created over HTTP with a runner key, its
 * socket opened with `ws` and the single-use ticket in the subprotocol (never in
 * the URL). `ws` answers the gateway's Ping with Pong by itself.
 */
import { WebSocket } from 'ws';
import { RequestFailed, VisualError } from './errors.js';
import { checkedOrigin } from './origin.js';
import { MAX_JPEG_BYTES } from './messages.js';
import {
  checkVisualSession, claimTicket, finiteMs, streamUrl, SUBPROTOCOL, VisualStream, type StreamHandlers,
} from './screen.js';
import { apiKey, errorFrom } from './http.js';
import type { Credential, VisualMode, VisualSession } from './types.js';

export interface CreateSessionOptions {
  baseUrl: string | URL;
  computerId: string;
  credential: Credential;
  mode: VisualMode;
  /** This client's finite deadline for the HTTP request, in milliseconds. */
  timeoutMs: number;
}

/** `POST /api/visual/sessions`: the HTTP 201 session. It holds a single-use ticket: keep it out of logs and storage. */
export async function createVisualSession({ baseUrl, computerId, credential, mode, timeoutMs }: CreateSessionOptions): Promise<VisualSession> {
  if (typeof computerId !== 'string' || !computerId) throw new TypeError('Select a computer of your account.');
  if (mode !== 'observe' && mode !== 'control') throw new TypeError('mode is observe or control.');
  const origin = checkedOrigin(baseUrl);
  const key = await apiKey(credential);
  let response: Response;
  try {
    response = await fetch(new URL('/api/visual/sessions', origin), {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(finiteMs(timeoutMs, 'timeoutMs')),
      headers: {
        Authorization: `Bearer ${key}`,
        'Content-Type': 'application/json',
        Accept: 'application/json',
        'X-RAM-Intent': 'visual-session',
      },
      body: JSON.stringify({ computer_id: computerId, mode, transport: 'jpeg-websocket-v1' }),
    });
  } catch (error) {
    throw new RequestFailed(`Could not create the session: ${(error as Error).name}.`);
  }
  if (response.status !== 201) throw await errorFrom(response);
  return checkVisualSession(await response.json(), mode);
}

export interface OpenStreamOptions extends StreamHandlers {
  baseUrl: string | URL;
  computerId: string;
  credential: Credential;
  mode?: VisualMode;
  /** Finite deadline in milliseconds for the HTTP creation and for the handshake, each. */
  timeoutMs?: number;
}

/** Connect a session another call created (its ticket is consumed by this one attempt). */
export async function connectVisualSession(
  baseUrl: string | URL, session: VisualSession, handlers: StreamHandlers, timeoutMs = 30_000,
): Promise<VisualStream> {
  const origin = checkedOrigin(baseUrl);
  checkVisualSession(session);
  const url = streamUrl(origin, session.websocket_path);
  claimTicket(session);
  const socket = new WebSocket(url, [SUBPROTOCOL, session.ticket_protocol_prefix + session.ticket], {
    handshakeTimeout: finiteMs(timeoutMs, 'timeoutMs'),
    maxPayload: MAX_JPEG_BYTES + 1024,
    perMessageDeflate: false,
    followRedirects: false,
  });
  // The stream and its listeners are attached inside the 'open' event: the first messages may
  // arrive in the same chunk as the handshake answer, and ws would drop them without a listener.
  return new Promise<VisualStream>((resolve, reject) => {
    const fail = (why: string) => { socket.removeAllListeners(); socket.on('error', () => {}); socket.terminate(); reject(new VisualError(why)); };
    socket.once('open', () => {
      socket.removeAllListeners();
      if (socket.protocol !== SUBPROTOCOL) {
        fail('The server did not select ram-jpeg-v1.');
        return;
      }
      const stream = new VisualStream(
        {
          sendText: (text) => socket.send(text),
          close: () => socket.close(),
          isOpen: () => socket.readyState === WebSocket.OPEN,
        },
        session,
        handlers,
      );
      socket.on('message', (data, isBinary) => {
        const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
        if (isBinary) stream.onBinary(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
        else stream.onText(bytes.toString('utf8'));
      });
      socket.on('error', () => stream.close('socket error'));
      socket.on('close', () => stream.onClosed());
      resolve(stream);
    });
    // The message of a refused handshake names no ticket; say only what failed.
    socket.once('unexpected-response', (_request, response) => fail(`Could not open the stream (HTTP ${response.statusCode}).`));
    socket.once('error', (error) => fail(`Could not open the stream: ${error.name}.`));
  });
}

/** Create a session (runner key) and open its socket. Nothing reconnects: after `onDisconnect`, decide explicitly. */
export async function openVisualStream({
  baseUrl, computerId, credential, mode = 'observe', timeoutMs = 30_000, ...handlers
}: OpenStreamOptions): Promise<VisualStream> {
  const session = await createVisualSession({ baseUrl, computerId, credential, mode, timeoutMs });
  return connectVisualSession(baseUrl, session, handlers, timeoutMs);
}

/**
 * The spec's `observeComputer`: observe `computerId` (no control, no input, no
 * reconnection). Wait for the first image with `await stream.firstFrame(ms)`.
 */
export function observeComputer(options: Omit<OpenStreamOptions, 'mode'>): Promise<VisualStream> {
  return openVisualStream({ ...options, mode: 'observe' });
}

