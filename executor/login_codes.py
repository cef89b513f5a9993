"""Every way ``browser_login`` can end without completing: one record per code.

The spec gives a login three outcomes: success and portal refusal (normal
results) and "did not complete" (``isError``, category ``unprocessable``):
nothing was proven about the credential. The spec names two causes
(``browser.captcha_pending``, ``browser.login_timeout``); each other cause has
its own code here, so an agent (and a person reading the run) can tell a slow
portal from a missing credential or a vault that is down. Never an
availability category: that would let infrastructure re-run the call and
submit the password again on its own; the model decides whether to repeat.

The executor (``executor/login.py``) and the worker (``runs/browser.py``,
for a computer that did not answer) build their results from this table, and
``docs/security.md`` lists it (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CATEGORY = "unprocessable"
SNAPSHOT_AND_RETRY = "Take a snapshot of the page (for example with extract_text) and call browser_login again if it still needs a login."


@dataclass(frozen=True)
class LoginCode:
    code: str
    # When it happens (the documentation's table).
    when: str
    # What the agent is told to do (the end of every message with this code).
    advice: str


LOGIN_CODES: dict[str, LoginCode] = {
    entry.code: entry
    for entry in (
        LoginCode(
            "browser.captcha_pending",
            "The managed browser was still solving a captcha when the budget ran out (before the submit: nothing "
            "was submitted).",
            SNAPSHOT_AND_RETRY + " If a challenge is still shown, call request_takeover with reason captcha.",
        ),
        LoginCode(
            "browser.login_timeout",
            "The login did not finish within the budget: the portal was slow or still loading.",
            SNAPSHOT_AND_RETRY,
        ),
        LoginCode(
            "browser.origin_refused",
            "The credential would have reached a page or frame outside its origins (the top page on another "
            "origin, a field inside a frame, a selector that enters a frame, focus moved into a frame, a field "
            "that is not a text input), or its form would send it with a method other than POST (GET puts it in "
            "the address) or to an action or formaction off the credential's origins; nothing more was typed or "
            "submitted, and what was typed was emptied.",
            "Navigate to the portal's own login page (one of the credential's origins) and call browser_login "
            "again, with selectors of the top page only. A form that posts elsewhere or uses GET cannot be signed "
            "into with browser_login: call request_takeover so a person signs in.",
        ),
        LoginCode(
            "browser.credential_not_found",
            "No portal credential with that id in the run's account's vault; nothing was typed.",
            "Check the credentialId (credentials_list lists the stored ones), or call request_credential so a "
            "person saves one, then continue with browser_login.",
        ),
        LoginCode(
            "browser.login_form_not_found",
            "No password field on the current page, or passwordSelector does not select a password input; "
            "nothing was typed.",
            "Navigate to the portal's login page (or open its login form), or pass passwordSelector (and "
            "usernameSelector, submitSelector), then call browser_login again.",
        ),
        LoginCode(
            "browser.login_step_pending",
            "The portal took the password and asks for a further step browser_login cannot answer (the password "
            "field hidden but still filled, or a one-time-code field shown without a stored TOTP secret); the "
            "fields it filled were emptied.",
            "Call request_takeover with reason verification so a person completes the step (or, for a one-time "
            "code, call request_credential so a person saves the TOTP secret, then browser_login again).",
        ),
        LoginCode(
            "browser.login_unconfirmed",
            "The credential was typed and the page shows neither a sign-in (the filled password field gone or "
            "hidden, no password field visible, no field holding the password) nor a refusal tied to the login "
            "form; for example a submitSelector that is not the form's submit control (a show-password toggle) "
            "submitted nothing. The fields it filled were emptied.",
            "Take a snapshot of the page (for example with extract_text); if it still shows the login form, call "
            "browser_login again with the form's own submit control as submitSelector (or none), or call "
            "request_takeover so a person signs in.",
        ),
        LoginCode(
            "browser.page_changed",
            "The page navigated away from the checked field before the credential was typed; nothing was submitted.",
            "Wait for the login page to finish loading (wait_for), take a snapshot, and call browser_login again.",
        ),
        LoginCode(
            "browser.vault_unavailable",
            "The vault could not be reached, refused the run's read grant, or gave no grant; nothing was typed.",
            "Nothing is wrong with the credential as far as anyone knows. Call browser_login again later; if it "
            "keeps failing, call fail and say the vault is unavailable.",
        ),
        LoginCode(
            "browser.provider_not_configured",
            "The run asks for captcha solving, and the computer's managed browser session was created with its "
            "provider's solver off (the computer's solve_captcha option); nothing was typed.",
            "Call fail and say captcha solving is not configured for this computer (or call request_takeover so a "
            "person signs in).",
        ),
        LoginCode(
            "browser.binding_changed",
            "The run's computer was reassigned or restarted with a new binding; no credential was read or typed.",
            "The run cannot sign in on this computer: call fail.",
        ),
        LoginCode(
            "browser.browser_error",
            "The browser failed during the login (a crash or a protocol error); the credential may or may not "
            "have been submitted.",
            SNAPSHOT_AND_RETRY,
        ),
        LoginCode(
            "browser.executor_unavailable",
            "The computer's executor could not be reached or failed before the budget ran out (past the budget, "
            "the answer is browser.login_timeout); the credential may or may not have been submitted.",
            "Take a snapshot of the page (for example with extract_text) before anything else; call browser_login "
            "again only if it still needs a login.",
        ),
    )
}

CAPTCHA_PENDING = "browser.captcha_pending"
LOGIN_TIMEOUT = "browser.login_timeout"
ORIGIN_REFUSED = "browser.origin_refused"
CREDENTIAL_NOT_FOUND = "browser.credential_not_found"
LOGIN_FORM_NOT_FOUND = "browser.login_form_not_found"
PAGE_CHANGED = "browser.page_changed"
VAULT_UNAVAILABLE = "browser.vault_unavailable"
PROVIDER_NOT_CONFIGURED = "browser.provider_not_configured"
BINDING_CHANGED = "browser.binding_changed"
BROWSER_ERROR = "browser.browser_error"
LOGIN_STEP_PENDING = "browser.login_step_pending"
LOGIN_UNCONFIRMED = "browser.login_unconfirmed"
EXECUTOR_UNAVAILABLE = "browser.executor_unavailable"


def not_completed(code: str, what: str, *, artifact_id: str | None = None) -> dict[str, Any]:
    """The tool result of a login that did not complete: ``what`` happened, then what to do."""
    entry = LOGIN_CODES[code]
    if len(what) > 1 and what[0].isupper() and what[1].islower():
        what = what[0].lower() + what[1:]
    result: dict[str, Any] = {
        "content": f"The login did not complete: {what} Nothing is proven about the credential. {entry.advice}",
        "isError": True,
        "code": code,
        "category": CATEGORY,
    }
    if artifact_id is not None:
        result["artifact_id"] = artifact_id
    return result


# What an agent whose auth_answer sent nothing is told to do, by code (the codes are browser_login's).
AUTH_ADVICE: dict[str, str] = {
    ORIGIN_REFUSED: "Answer with a credential stored for exactly that origin (call request_credential with it as "
    "portal_origin so a person saves one), or cancel the prompt (accept false).",
    CREDENTIAL_NOT_FOUND: "Check the credentialId, or call request_credential so a person saves one for that origin.",
    VAULT_UNAVAILABLE: "Nothing is wrong with the credential as far as anyone knows. Call auth_answer again later; "
    "if it keeps failing, cancel the prompt or call fail.",
    BINDING_CHANGED: "The run cannot sign in on this computer: call fail.",
}


def auth_not_answered(code: str, what: str) -> dict[str, Any]:
    """The tool result of an ``auth_answer`` that sent nothing to the site: the prompt still waits."""
    return {
        "content": f"The sign-in prompt was not answered: {what} Nothing was sent to the site, and the prompt "
        f"still waits. {AUTH_ADVICE[code]}",
        "isError": True,
        "code": code,
        "category": CATEGORY,
    }


def code_table() -> str:
    """The documentation's table of codes (``docs/security.md``)."""
    rows = ["| code | category | when | what the agent is told to do |", "|---|---|---|---|"]
    rows += [f"| `{e.code}` | `{CATEGORY}` | {e.when} | {e.advice} |" for e in LOGIN_CODES.values()]
    return "\n".join(rows) + "\n"
