/**
 * `@ram/sdk` for Node (≥ 20) on a trusted host: the REST client with the
 * intervention descriptor check, a run handle for harnesses (`ram.run(id).act(...)`), the `jpeg-websocket-v1` screen over `ws`, and the
 * webhook signature check (`verifyWebhook`).
 * Browsers get `@ram/sdk/browser` (the screen from a ticket, never an API key).
 */
export { RamClient, RunHandle, TERMINAL_STATUSES } from './client.js';
export type { ActOptions, Page, RamClientOptions, RunActOptions, RunsListFilter } from './client.js';
export {
  ControlError, InvalidDescriptor, RamError, RamSdkError, RequestFailed, SECRET_FIELD_FOCUSED, SECRET_IN_ARGUMENTS,
  SELECTOR_VALUE_DEPENDENT, UnsafeOrigin, VisualError,
} from './errors.js';
export { checkedOrigin } from './origin.js';
export { checkIntervention } from './descriptor.js';
export { checkClientMessage, checkInput, checkServerMessage, isValidInput, MAX_JPEG_BYTES, MAX_SEQUENCE } from './messages.js';
export { bindHumanGestures, checkVisualSession, streamUrl, VisualStream } from './screen.js';
export type { GestureState, HumanGestures, OnMessage, RenderJpeg, StreamHandlers } from './screen.js';
export { connectVisualSession, createVisualSession, observeComputer, openVisualStream } from './node-screen.js';
export type { CreateSessionOptions, OpenStreamOptions } from './node-screen.js';
export { signWebhook, verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { VerifyOptions } from './webhooks.js';
export type * from './types.js';
