/**
 * The `jpeg-websocket-v1` screen, independent of the WebSocket implementation
 * (`ws` in Node, the browser's `WebSocket`): pairing of each `frame` with the JPEG
 * that follows it, the generation check, the message checks, and the adapter for
 * a person's gestures. Nothing here reconnects, reuses a ticket or resends an input.
 */
import { ControlError, VisualError } from './errors.js';
import { checkedOrigin } from './origin.js';
import { checkInput, checkServerMessage, MAX_JPEG_BYTES } from './messages.js';
import { isPlainObject, UUID } from './descriptor.js';
import type { FrameMessage, HumanInput, ServerMessage, VisualMode, VisualSession } from './types.js';

export const STREAM_PATH = '/api/visual/stream';
export const SUBPROTOCOL = 'ram-jpeg-v1';
export const MAX_WAIT_MS = 2_147_483_647;
const TICKET = /^[A-Za-z0-9_-]{43}$/;

/** Gets each JPEG with the `frame` that announced it: replace the previous image; drop old ones if the UI falls behind. */
export type RenderJpeg = (jpeg: Uint8Array, frame: FrameMessage) => void;
export type OnMessage = (message: ServerMessage) => void;

export interface StreamHandlers {
  renderJpeg: RenderJpeg;
  /** Every JSON message, after it passed the contract check. */
  onMessage?: OnMessage;
  /** Called once, when the socket ends for any reason: offer an explicit Reconnect (a new ticket). */
  onDisconnect?: (reason: string) => void;
}

/** What a stream needs from a WebSocket. */
export interface SocketPort {
  sendText(text: string): void;
  close(): void;
  isOpen(): boolean;
}

export function finiteMs(value: unknown, name: string): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_WAIT_MS) {
    throw new RangeError(`Choose ${name} between 1 and 2147483647 milliseconds.`);
  }
  return value as number;
}

/** Check an HTTP 201 visual session (it holds a ticket: keep it out of logs and storage). */
export function checkVisualSession(session: unknown, mode?: VisualMode): VisualSession {
  if (
    !isPlainObject(session) || session.version !== 1 || session.transport !== 'jpeg-websocket-v1' ||
    session.subprotocol !== SUBPROTOCOL || session.ticket_protocol_prefix !== 'ram-ticket.' ||
    typeof session.ticket !== 'string' || !TICKET.test(session.ticket) ||
    typeof session.session_id !== 'string' || !UUID.test(session.session_id) ||
    typeof session.websocket_path !== 'string' ||
    (session.mode !== 'observe' && session.mode !== 'control') || (mode !== undefined && session.mode !== mode)
  ) {
    throw new VisualError('The session answer does not follow jpeg-websocket-v1.');
  }
  return session as unknown as VisualSession;
}

const usedSessions = new WeakSet<object>();

/** A session's ticket allows one connection attempt: refuse a second one before anything is sent. */
export function claimTicket(session: VisualSession): void {
  if (usedSessions.has(session)) {
    throw new VisualError("This session's ticket was already used: create a new session.");
  }
  usedSessions.add(session);
}

/** `websocket_path` resolved on `origin` as ws(s)://, refused unless it is exactly the stream path. */
export function streamUrl(origin: string, websocketPath: string): string {
  const base = new URL(checkedOrigin(origin));
  let url: URL;
  try {
    url = new URL(websocketPath, base);
  } catch {
    throw new VisualError('Invalid endpoint.');
  }
  if (url.origin !== base.origin || url.search || url.hash || websocketPath.includes('?') ||
      websocketPath.includes('#') || url.pathname !== STREAM_PATH) {
    throw new VisualError('Invalid endpoint.');
  }
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

/**
 * One open socket of a visual session. Each `frame` is paired with the binary JPEG
 * that follows it; a JPEG without metadata or over 2,000,000 bytes, a message outside
 * the contract, a frame of another `generation`, or an `error` message closes it.
 */
export class VisualStream {
  readonly sessionId: string;
  readonly mode: VisualMode;
  generation: string | undefined;
  framesRendered = 0;
  closed = false;
  closeReason: string | undefined;
  /** Resolves when the socket has ended, with the reason. */
  readonly ended: Promise<string>;
  private pendingFrame: FrameMessage | undefined;
  private readonly listeners: OnMessage[] = [];
  private readonly frameWaiters: Array<() => void> = [];
  private resolveEnded!: (reason: string) => void;

  constructor(
    private readonly port: SocketPort,
    session: VisualSession,
    private readonly handlers: StreamHandlers,
  ) {
    this.sessionId = session.session_id;
    this.mode = session.mode;
    this.ended = new Promise((resolve) => { this.resolveEnded = resolve; });
    if (handlers.onMessage) this.listeners.push(handlers.onMessage);
  }

  /** @internal Listeners get every checked message (the gesture adapter uses this). */
  addListener(listener: OnMessage): void {
    this.listeners.push(listener);
  }

  /** @internal */
  sendJson(message: unknown): void {
    if (this.closed || !this.port.isOpen()) throw new ControlError('Socket closed.');
    this.port.sendText(JSON.stringify(message));
  }

  /** Close the socket (idempotent); `onDisconnect` runs once. */
  close(reason = 'closed by the client'): void {
    this.closeReason ??= reason;
    try { this.port.close(); } finally { this.onClosed(); }
  }

  /** Wait at most `ms` for the first JPEG; on expiry or close, the stream is closed and this rejects. */
  firstFrame(ms: number): Promise<void> {
    finiteMs(ms, 'the deadline');
    if (this.framesRendered > 0) return Promise.resolve();
    if (this.closed) return Promise.reject(new VisualError(`The stream closed: ${this.closeReason ?? 'by the server'}.`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.close('no frame within the deadline');
        reject(new VisualError('No frame arrived within the deadline.'));
      }, ms);
      this.frameWaiters.push(() => {
        clearTimeout(timer);
        if (this.framesRendered > 0) resolve();
        else reject(new VisualError(`The stream closed: ${this.closeReason ?? 'by the server'}.`));
      });
    });
  }

  /** @internal A binary message arrived. */
  onBinary(jpeg: Uint8Array): void {
    if (this.closed) return;
    try {
      if (!this.pendingFrame) throw new VisualError('JPEG without metadata.');
      if (jpeg.byteLength > MAX_JPEG_BYTES) throw new VisualError('Frame exceeds the limit.');
      const frame = this.pendingFrame;
      this.pendingFrame = undefined;
      this.handlers.renderJpeg(jpeg, frame);
      this.framesRendered += 1;
      this.wakeFrameWaiters();
    } catch (error) {
      this.close(error instanceof Error ? error.message : 'broken frame');
    }
  }

  /** @internal A text message arrived. */
  onText(text: string): void {
    if (this.closed) return;
    try {
      const message = checkServerMessage(JSON.parse(text));
      if (message.type === 'frame') {
        if (this.generation !== undefined && this.generation !== message.generation) {
          throw new VisualError('Observe the current generation again.');
        }
        this.generation = message.generation;
        this.pendingFrame = message;
      }
      for (const listener of [...this.listeners]) listener(message);
      if (message.type === 'error') this.close(message.message);
    } catch (error) {
      this.close(error instanceof Error ? error.message : 'broken message');
    }
  }

  /** @internal The socket ended (any cause). */
  onClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason ??= 'closed by the server';
    this.wakeFrameWaiters();
    this.resolveEnded(this.closeReason);
    this.handlers.onDisconnect?.(this.closeReason);
  }

  private wakeFrameWaiters(): void {
    for (const wake of this.frameWaiters.splice(0)) wake();
  }
}

export interface GestureState {
  controlling: boolean;
  awaitingAck?: boolean;
  /** Present when control ended: `true` when a takeover, input or release was in flight (its result is unknown). */
  uncertain?: boolean;
}

export interface HumanGestures {
  /** Ask for control; resolves once this socket holds the grant (`state` human, `controlling` true). */
  takeover(): Promise<void>;
  /** Send one input; resolves on its `ack` (the input ran; no business effect is proved). */
  input(value: HumanInput): Promise<void>;
  /** Hand control back; resolves once the server confirmed `released`. Continuing the run is a separate request. */
  release(): Promise<void>;
  readonly controlling: boolean;
}

/**
 * The spec's gesture adapter on a `control` stream. Call `takeover`, `input` and
 * `release` only from a person's explicit gestures. Each sends one message and waits
 * at most `waitMs` (the application's finite choice, 1 to 2147483647) for its
 * confirmation; one input is in flight at a time, numbered from 1 within the grant.
 * When the deadline passes, an `error` arrives or the socket closes, control ends,
 * the socket is closed and the pending call rejects with `ControlError`: the result
 * is uncertain. Never resend it: reconnect with a new ticket and observe first.
 * `onState` gets `{controlling, awaitingAck}` after each message, or
 * `{controlling: false, uncertain}` once when control ends.
 */
export function bindHumanGestures(stream: VisualStream, onState: (state: GestureState) => void, waitMs: number): HumanGestures {
  finiteMs(waitMs, 'waitMs');
  if (stream.mode !== 'control') throw new ControlError('Open the stream with mode control to offer control.');
  // Frames that arrived before the adapter was bound count as observed.
  let observed = stream.generation !== undefined;
  let controlling = false;
  let stopped = false;
  let sequence = 0;
  let pending: number | undefined;
  let transition: 'takeover' | 'release' | undefined;
  let outcome: { resolve: () => void; reject: (error: Error) => void; timer: ReturnType<typeof setTimeout> } | undefined;

  const settle = () => {
    if (!outcome) return;
    clearTimeout(outcome.timer);
    const { resolve } = outcome;
    outcome = undefined;
    resolve();
  };
  const stop = () => {
    const uncertain = pending !== undefined || transition !== undefined;
    controlling = false;
    if (outcome) {
      clearTimeout(outcome.timer);
      const { reject } = outcome;
      outcome = undefined;
      reject(new ControlError('Uncertain result; check the screen before anything else.'));
    }
    if (!stopped) {
      stopped = true;
      onState({ controlling: false, uncertain });
    }
  };
  const sendAndWait = (message: unknown): Promise<void> => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { stop(); stream.close('no confirmation within the deadline'); }, waitMs);
    outcome = { resolve, reject, timer };
    try {
      stream.sendJson(message);
    } catch {
      stop();
      stream.close('could not send');
    }
  });

  stream.addListener((event) => {
    if (stopped) return;
    if (event.type === 'frame') {
      observed = true;
      if (event.controlling !== true) controlling = false;
    } else if (event.type === 'state') {
      if (event.control === 'human' && event.controlling === true) {
        if (transition === 'takeover' && pending === undefined) {
          sequence = 0;
          controlling = true;
          transition = undefined;
          settle();
        } else if (!controlling) {
          stop();
          stream.close('unexpected grant');
          return;
        }
      } else {
        controlling = false;
        if (event.control === 'released' && transition === 'release') {
          transition = undefined;
          settle();
        }
      }
    } else if (event.type === 'ack' && pending !== undefined && event.sequence === pending) {
      pending = undefined;
      settle();
    } else if (event.type === 'error') {
      stop();
      return;
    }
    onState({ controlling, awaitingAck: pending !== undefined });
  });
  void stream.ended.then(stop);

  return {
    get controlling() { return controlling; },
    takeover() {
      if (!observed || controlling || transition || pending !== undefined || stopped) {
        return Promise.reject(new ControlError('Observe first.'));
      }
      transition = 'takeover';
      return sendAndWait({ type: 'takeover' });
    },
    input(value: HumanInput) {
      if (!controlling || pending !== undefined || stopped) return Promise.reject(new ControlError('Wait for control and ack.'));
      try { checkInput(value); } catch (error) { return Promise.reject(error); }
      sequence += 1;
      pending = sequence;
      return sendAndWait({ type: 'input', sequence, input: value });
    },
    release() {
      if (!controlling || pending !== undefined || stopped) return Promise.reject(new ControlError('Wait for the ack.'));
      controlling = false;
      transition = 'release';
      return sendAndWait({ type: 'release' });
    },
  };
}
