/**
 * Checks of `jpeg-websocket-v1` messages (closed objects, every bound of the spec):
 * inputs before they are sent, and every message the server sends before it is used.
 */
import { ControlError, VisualError } from './errors.js';
import { isPlainObject, UUID } from './descriptor.js';
import type { ClientMessage, HumanInput, ServerMessage } from './types.js';

export const MAX_SEQUENCE = 9_007_199_254_740_991;
export const MAX_JPEG_BYTES = 2_000_000;
const NAMED_KEYS = new Set([
  'Backspace', 'Tab', 'Enter', 'Escape', 'Delete', 'Home', 'End', 'ArrowUp', 'ArrowDown', 'ArrowLeft',
  'ArrowRight', 'PageUp', 'PageDown', 'Shift', 'Control', 'Alt', 'Meta',
  ...Array.from({ length: 12 }, (_, i) => `F${i + 1}`),
]);

function keysWithin(value: Record<string, unknown>, allowed: string[], required: string[] = allowed): boolean {
  const keys = Object.keys(value);
  return keys.every((k) => allowed.includes(k)) && required.every((k) => Object.hasOwn(value, k));
}

function number(value: unknown, low: number, high: number): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value >= low && value <= high;
}

function positive(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_SEQUENCE;
}

function counter(value: unknown): boolean {
  return Number.isInteger(value) && (value as number) >= 0;
}

function httpUrl(url: unknown): boolean {
  if (typeof url !== 'string' || url.length > 4096 || /[\s\x00-\x1f]/.test(url)) return false;
  const authority = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(url);
  if (!authority || authority[1]!.includes('@')) return false;
  try {
    const parsed = new URL(url);
    return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname !== '';
  } catch {
    return false;
  }
}

/** `true` when `value` is a valid `input` object of the input envelope. */
export function isValidInput(value: unknown): value is HumanInput {
  if (!isPlainObject(value)) return false;
  switch (value.type) {
    case 'pointer':
      return keysWithin(value, ['type', 'phase', 'x', 'y', 'button'], ['type', 'phase', 'x', 'y']) &&
        ['move', 'down', 'up'].includes(value.phase as string) &&
        number(value.x, 0, 1279) && number(value.y, 0, 719) &&
        (!Object.hasOwn(value, 'button') || ['left', 'middle', 'right'].includes(value.button as string));
    case 'text':
      return keysWithin(value, ['type', 'text']) && typeof value.text === 'string' && value.text.length <= 4000;
    case 'key':
      return keysWithin(value, ['type', 'phase', 'key']) && ['down', 'up'].includes(value.phase as string) &&
        typeof value.key === 'string' && (value.key.length === 1 || NAMED_KEYS.has(value.key));
    case 'wheel':
      return keysWithin(value, ['type', 'delta_x', 'delta_y']) &&
        number(value.delta_x, -2000, 2000) && number(value.delta_y, -2000, 2000);
    case 'navigate':
      return keysWithin(value, ['type', 'url']) && httpUrl(value.url);
    default:
      return false;
  }
}

/** Validate one `input` object; throws `ControlError` when it breaks the contract. */
export function checkInput(value: unknown): HumanInput {
  if (!isValidInput(value)) throw new ControlError('Invalid input: see the input envelope contract.');
  return value;
}

/** Validate a message a client sends (`takeover`, `release`, `input`); throws `ControlError`. */
export function checkClientMessage(message: unknown): ClientMessage {
  const ok = isPlainObject(message) && (
    ((message.type === 'takeover' || message.type === 'release') && keysWithin(message, ['type'])) ||
    (message.type === 'input' && keysWithin(message, ['type', 'sequence', 'input']) &&
      positive(message.sequence) && isValidInput(message.input))
  );
  if (!ok) throw new ControlError('Invalid message: see the jpeg-websocket-v1 contract.');
  return message as ClientMessage;
}

function isServerMessage(m: Record<string, unknown>): boolean {
  switch (m.type) {
    case 'hello':
      return keysWithin(m, ['type', 'version', 'transport', 'mode', 'max_fps', 'viewport']) && m.version === 1 &&
        m.transport === 'jpeg-websocket-v1' && (m.mode === 'observe' || m.mode === 'control') &&
        Number.isInteger(m.max_fps) && number(m.max_fps, 1, 10) &&
        isPlainObject(m.viewport) && keysWithin(m.viewport, ['width', 'height']) &&
        m.viewport.width === 1280 && m.viewport.height === 720;
    case 'frame':
      return keysWithin(m, ['type', 'sequence', 'generation', 'mime_type', 'width', 'height', 'control', 'controlling', 'url']) &&
        positive(m.sequence) && typeof m.generation === 'string' && UUID.test(m.generation) &&
        m.mime_type === 'image/jpeg' && m.width === 1280 && m.height === 720 &&
        ['available', 'leased', 'transition', 'human'].includes(m.control as string) &&
        typeof m.controlling === 'boolean' && typeof m.url === 'string';
    case 'state':
      switch (m.control) {
        case 'transition':
          return keysWithin(m, ['type', 'control']);
        case 'human':
          return keysWithin(m, ['type', 'control', 'controlling', 'stopped_processes', 'cancelled_downloads', 'aborted_exports']) &&
            m.controlling === true && counter(m.stopped_processes) && counter(m.cancelled_downloads) && counter(m.aborted_exports);
        case 'released':
        case 'unavailable':
          return keysWithin(m, ['type', 'control', 'controlling']) && m.controlling === false;
        default:
          return false;
      }
    case 'ack':
      return keysWithin(m, ['type', 'sequence']) && positive(m.sequence);
    case 'error':
      return keysWithin(m, ['type', 'message']) && typeof m.message === 'string' && m.message !== '';
    default:
      return false;
  }
}

/** Validate a message the server sent; throws `VisualError` (the stream then closes: nothing is guessed). */
export function checkServerMessage(message: unknown): ServerMessage {
  if (!isPlainObject(message) || !isServerMessage(message)) {
    throw new VisualError('The server sent a message outside the jpeg-websocket-v1 contract.');
  }
  return message as ServerMessage;
}
