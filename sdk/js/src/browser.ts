/**
 * `@ram/sdk/browser`: the screen helpers for a page, and nothing else.
 *
 * A browser never holds an API key: a trusted server creates the visual session
 * with its runner key (`RamClient.visualSessions.create`) and hands the page only
 * that session's single-use ticket. `openScreen` connects it with the browser's
 * own `WebSocket` (which answers Ping with Pong by itself).
 */
import { VisualError } from './errors.js';
import { checkedOrigin } from './origin.js';
import { checkVisualSession, claimTicket, finiteMs, streamUrl, SUBPROTOCOL, VisualStream, type StreamHandlers } from './screen.js';
import type { VisualSession } from './types.js';

export {
  ControlError, InvalidDescriptor, RamError, RamSdkError, UnsafeOrigin, VisualError,
} from './errors.js';
export { checkClientMessage, checkInput, checkServerMessage, isValidInput, MAX_JPEG_BYTES, MAX_SEQUENCE } from './messages.js';
export { bindHumanGestures, checkVisualSession, VisualStream } from './screen.js';
export type { GestureState, HumanGestures, OnMessage, RenderJpeg, StreamHandlers } from './screen.js';
export type * from './types.js';

const KEY_OPTIONS = ['credential', 'apiKey', 'api_key', 'key', 'authorization', 'token'];

export interface OpenScreenOptions extends StreamHandlers {
  /** The RAM server's origin (the page's own origin when it is served by RAM). */
  origin: string;
  /** The HTTP 201 visual session a trusted server created; its ticket works once, within 60 s. */
  session: VisualSession;
  /** Finite deadline for the handshake, in milliseconds (default 30,000). */
  timeoutMs?: number;
}

/** Connect a visual session in the browser. Never reconnects: after `onDisconnect`, ask your server for a new session. */
export async function openScreen(options: OpenScreenOptions): Promise<VisualStream> {
  if (KEY_OPTIONS.some((name) => Object.hasOwn(options, name))) {
    throw new TypeError('A browser never takes an API key: pass the session a trusted server created.');
  }
  const { origin, session, timeoutMs = 30_000, ...handlers } = options;
  checkVisualSession(session);
  const url = streamUrl(checkedOrigin(origin), session.websocket_path);
  claimTicket(session);
  const socket = new WebSocket(url, [SUBPROTOCOL, session.ticket_protocol_prefix + session.ticket]);
  socket.binaryType = 'arraybuffer';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { socket.close(); reject(new VisualError('The handshake did not finish in time.')); }, finiteMs(timeoutMs, 'timeoutMs'));
    socket.onopen = () => { clearTimeout(timer); resolve(); };
    socket.onerror = () => { clearTimeout(timer); reject(new VisualError('Could not open the stream.')); };
  });
  if (socket.protocol !== SUBPROTOCOL) {
    socket.close();
    throw new VisualError('The server did not select ram-jpeg-v1.');
  }
  const stream = new VisualStream(
    { sendText: (text) => socket.send(text), close: () => socket.close(), isOpen: () => socket.readyState === WebSocket.OPEN },
    session,
    handlers,
  );
  socket.onmessage = (event: MessageEvent) => {
    if (typeof event.data === 'string') stream.onText(event.data);
    else stream.onBinary(new Uint8Array(event.data as ArrayBuffer));
  };
  socket.onerror = () => stream.close('socket error');
  socket.onclose = () => stream.onClosed();
  return stream;
}
