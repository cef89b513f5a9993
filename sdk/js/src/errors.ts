/**
 * Errors of the SDK. None of them carries an API key, a ticket or an invite.
 */

/** Base class of every error the SDK throws (besides `TypeError`/`RangeError` for programming mistakes). */
export class RamSdkError extends Error {
  override name = 'RamSdkError';
}

/**
 * The server refused a request: its HTTP `status` and the server's `error` text
 * (`{"error": "..."}`), with the whole JSON `body` (e.g. `continued_run_id` on a 409).
 */
export class RamError extends RamSdkError {
  override name = 'RamError';
  readonly status: number;
  readonly error: string;
  readonly body: Record<string, unknown>;

  constructor(status: number, error: string, body?: Record<string, unknown>) {
    super(`HTTP ${status}: ${error}`);
    this.status = status;
    this.error = error;
    this.body = body ?? {};
  }
}

/** The request did not get an answer (network failure or the client's deadline). It may still have had an effect. */
export class RequestFailed extends RamSdkError {
  override name = 'RequestFailed';
}

/** The base URL is not an HTTPS origin (or plain HTTP on local loopback). */
export class UnsafeOrigin extends RamSdkError {
  override name = 'UnsafeOrigin';
}

/** An intervention descriptor failed the checks: present it to nobody. */
export class InvalidDescriptor extends RamSdkError {
  override name = 'InvalidDescriptor';
}

/** A visual session could not be created or opened, or the stream broke the protocol. */
export class VisualError extends RamSdkError {
  override name = 'VisualError';
}

/** A control gesture is not allowed now, or its result is uncertain: never resend it. */
export class ControlError extends RamSdkError {
  override name = 'ControlError';
}

/**
 * The tool error code (`ToolResult.code`, a failed run's `result.code`) of a selector refused
 * because it could depend on what a field holds. While the page holds a secret (a filled password
 * or one-time-code field, a field browser_login or a person filled), click, type, wait_for,
 * extract_text and upload take value-blind CSS only (tag, #id, .class, [attr], [attr="whole value"],
 * [attr~=word] — never on value —, combinators, :nth-child() and the structural pseudo-classes);
 * role=, text=, internal:*, xpath, :has-text(), [value...], ^= $= *= and value pseudo-classes such
 * as :invalid and :placeholder-shown are refused (category `invalid`).
 */
export const SELECTOR_VALUE_DEPENDENT = 'browser.selector_value_dependent';

/**
 * The tool error code (`ToolResult.code`, `result.code` of a failed run) of an action refused
 * because one of its arguments (a URL, typed text, a selector, a dialog's answer, anything the
 * agent supplied) carries a secret the computer's browser holds (a credential browser_login,
 * auth_answer or a person typed), in any case and in the encoded forms redaction knows. Nothing
 * was done; the message never says which argument. An honest agent never knows a secret
 * (category `invalid`).
 */
export const SECRET_IN_ARGUMENTS = 'browser.secret_in_arguments';

/**
 * The tool error code of a `press` refused because the focused field holds a secret: only Tab
 * and Escape are pressed there (another key would edit or submit the secret in place). Move the
 * focus with `click` or Tab first (category `invalid`).
 */
export const SECRET_FIELD_FOCUSED = 'browser.secret_field_focused';
