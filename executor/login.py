"""``browser_login``: authenticate the current page with a vault credential.

The username and password are read from Vault here, inside the executor, and
typed into the page; they never leave this process (not in a Celery message,
the tool result, a log or an event). Three outcomes, per the contract:

* success: a normal result with the username masked;
* portal refusal: a normal result, with a masked diagnostic capture stored;
* not completed: ``isError``, category ``unprocessable`` (never an
  availability category, so nothing re-submits the password on its own), with
  one code per cause from ``executor/login_codes.py`` (the spec's
  ``browser.captcha_pending`` and ``browser.login_timeout``, and
  ``browser.origin_refused``, ``browser.credential_not_found``,
  ``browser.vault_unavailable``…). An infrastructure failure is never reported
  as a slow portal. A masked diagnostic capture is stored for every outcome
  that happened on the page (refusal, timeout, unfinished captcha, refused
  origin, no login form) when the budget allows.

Frame-exact typing: immediately before every fill, click, press or submit
that carries or submits credential material (username, password, one-time
code), the target element must be in the top document (selectors that enter
frames are refused, and an element in any frame is refused) and the top
document's security origin, as Chromium reports it over CDP (not its URL),
must be exactly one of the credential's ``origins``. The value is set on
that element alone (no keystrokes that could land wherever focus is), and
focus is checked again after each fill: focus that moved into a frame
stops the login before anything is submitted.

Everything, from the vault read to the diagnostic capture, fits in one
end-to-end budget (120 s) that started when the tool call started in the
worker: the executor receives what is left of it and counts from the
request's arrival (its wait for the browser included). The last
``capture_reserve`` seconds are kept for the diagnostic capture of a login
that ran out of time. Nothing is retried automatically. Captcha waits
happen only with a managed browser that solves, on that very session: a
``steel`` computer with ``solveCaptcha`` (Steel's captcha status API for the
session the executor created) or a ``browserbase`` one unless the run sets
``solveCaptcha: false`` (the console signals of the session's own page, read
over CDP); ``local`` and ``cdp`` wait for nothing and query nothing. The
backend picks the solver (executor/backends/).

The parts: ``login_budget`` (the budget), ``login_solvers`` (captcha solvers),
``login_guard`` (where credential material may go), ``login_verdict`` (the filled
fields, the form's submission checks, the verdict), ``login_diagnostic`` (the capture).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from playwright.async_api import CDPSession, ElementHandle, Frame, Locator, Page, Request

from executor import server_link, taint
from executor.contracts import BrowserLoginArgs
from executor.login_budget import Budget, NotCompleted, OutOfBudget
from executor.login_codes import (
    BROWSER_ERROR,
    CAPTCHA_PENDING,
    CREDENTIAL_NOT_FOUND,
    LOGIN_FORM_NOT_FOUND,
    LOGIN_TIMEOUT,
    ORIGIN_REFUSED,
    PAGE_CHANGED,
    PROVIDER_NOT_CONFIGURED,
    VAULT_UNAVAILABLE,
    not_completed,
)
from executor.login_diagnostic import capture_diagnostic, detach_later
from executor.login_guard import (
    Guard,
    OriginRefused,
    PageChanged,
    Secret,
    frame_piercing,
    normal_origin,
    origin_allowed,
    totp,
)
from executor.login_solvers import NoSolver, Solver, SolverNotConfigured, wait_for_solver
from executor.login_verdict import (
    OTP_SELECTORS,
    Filled,
    check_submission,
    empty_filled,
    fate,
    first_visible,
    form_answered,
    signals,
    verdict,
)
from executor.server_link import ServerLink
from vault_bridge.credentials import VaultRefused, VaultUnavailable, mask_username, portal_credential_read

logger = logging.getLogger(__name__)

USERNAME_SELECTORS = [
    "input[autocomplete='username']",
    "input[type='email']",
    "input[name*='user' i]",
    "input[id*='user' i]",
    "input[name*='login' i]",
    "input[id*='login' i]",
    "input[name*='email' i]",
    "input[id*='email' i]",
]
PASSWORD_SELECTORS = ["input[type='password']"]
SUBMIT_SELECTORS = [
    "button[type='submit']",
    "input[type='submit']",
    "button:has-text('Sign in')",
    "button:has-text('Log in')",
    "button:has-text('Login')",
    "button:has-text('Entrar')",
    "form button",
]

# Kept after the capture for emptying the fields a login that did not sign in filled.
EMPTY_RESERVE_SECONDS = 1.0


async def _field(page: Page, selector: str | None, fallbacks: list[str], budget: Budget) -> Locator | None:
    if selector is not None:
        locator = page.locator(selector).first
        try:
            await locator.wait_for(state="visible", timeout=budget.ms(10_000))
        except Exception:  # noqa: BLE001
            if budget.spent:
                raise OutOfBudget from None
            return None
        return locator
    return await first_visible(page, fallbacks, budget)


async def _read_secret(account_id: str, credential_id: str, grant: str, budget: Budget) -> Secret | None:
    """The credential from the vault (None when absent); a vault that fails or does not answer in
    the budget is ``browser.vault_unavailable``, never a slow portal."""
    try:
        credential = await asyncio.wait_for(
            sync_to_async(portal_credential_read, thread_sensitive=False)(
                account_id=account_id, credential_id=credential_id, grant=grant
            ),
            timeout=budget.left(),
        )
    except (VaultUnavailable, VaultRefused, TimeoutError) as exc:
        logger.warning("vault read for browser_login failed: %s", type(exc).__name__)
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault did not give the credential (unreachable, refused or too slow); nothing was typed.",
            on_page=False,
        ) from None
    if credential is None:
        return None
    return Secret(
        username=credential.username,
        password=credential.password,
        totp_secret=credential.totp_secret or None,
        origins=tuple(origin for origin in map(normal_origin, credential.origins) if origin is not None),
    )


async def credential_for_origin(
    *, account_id: str, credential_id: str, grant: str, origin: str, budget: Budget
) -> Secret:
    """A credential of the account whose ``origins`` include exactly ``origin`` (a site's sign-in
    prompt, ``auth_answer``): read with the call's one-use grant like browser_login's, and checked
    by the same rule. Raises ``NotCompleted`` (nothing was sent anywhere) otherwise."""
    if not grant:
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault could not be asked for the credential (no read grant came with this call).",
            on_page=False,
        )
    secret = await _read_secret(account_id, credential_id, grant, budget)
    if secret is None:
        raise NotCompleted(
            CREDENTIAL_NOT_FOUND, "no portal credential with that id is stored for this account.", on_page=False
        )
    if not origin_allowed(normal_origin(origin), secret.origins):
        raise NotCompleted(
            ORIGIN_REFUSED,
            f"the credential's origins do not include {origin}, the origin that asks; it was not sent there.",
            on_page=False,
        )
    return secret


def _result(content: str, *, artifact_id: str | None = None) -> dict[str, Any]:
    """A completed login: signed in, or refused by the portal (normal results, never ``isError``)."""
    result: dict[str, Any] = {"content": content, "isError": False}
    if artifact_id is not None:
        result["artifact_id"] = artifact_id
    return {"tool_result": result}


TIMED_OUT = "the time budget ran out before it finished (the portal was slow or still loading)."
CAPTCHA_UNSOLVED = "the browser was still solving a CAPTCHA when the time budget ran out."


REFUSED = (
    "The portal refused the credential: it was submitted and the login form answered with a refusal. "
    "Do not retry the same credential; ask for another one or a person."
)


# --- The tool --------------------------------------------------------------------------


async def browser_login(
    page: Page,
    args: BrowserLoginArgs,
    *,
    solver: Solver,
    account_id: str,
    computer_id: str,
    grant: str = "",
    budget: Budget | None = None,
    server: ServerLink | None = None,
) -> dict[str, Any]:
    """Log in with the credential; ``budget`` is what is left of the call's end-to-end budget.

    ``solver`` comes from the computer's browser backend for this page and the run's settings;
    ``server`` is the executor's link to the server (the diagnostic's artifact goes there).
    Every answer but success is given after the diagnostic capture and after the fields the login
    filled were emptied, both inside the budget."""
    budget = budget or Budget(settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS)
    # The login works until the reserve; what is left then is for the capture and the emptying.
    work = budget.before(budget.capture_reserve() + min(EMPTY_RESERVE_SECONDS, budget.left() / 8))
    cdp: CDPSession | None = None
    # What the login is waiting for when the budget runs out (``captcha``: the solver).
    progress: dict[str, str] = {}
    filled = Filled()
    stopped: NotCompleted | None = None
    # Its own selectors follow the value-blind rule of every selector-taking tool (before the
    # vault is read): an answer that waits or not on a value-dependent selector is an oracle.
    for selector in (args.usernameSelector, args.passwordSelector, args.submitSelector):
        await taint.check_selector(page, selector)
    try:
        cdp = await page.context.new_cdp_session(page)
        signed_in_as = await asyncio.wait_for(
            _login(page, cdp, args, account_id, computer_id, grant, work, solver, progress, filled),
            timeout=work.left() + 0.25,
        )
        if signed_in_as is not None:
            detach_later(cdp)
            return _result(f"Logged in as {signed_in_as}.")
    except OriginRefused as exc:
        stopped = NotCompleted(ORIGIN_REFUSED, exc.message + " Nothing more was typed or submitted.")
    except PageChanged:
        stopped = NotCompleted(PAGE_CHANGED, "the page changed before the credential was typed; nothing was submitted.")
    except NotCompleted as exc:
        stopped = exc
    except (TimeoutError, OutOfBudget):
        # The budget ran out: while the managed browser was solving a captcha, or on the portal.
        if progress.get("waiting") == "captcha":
            stopped = NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED)
        else:
            stopped = NotCompleted(LOGIN_TIMEOUT, TIMED_OUT)
    except asyncio.CancelledError:
        raise  # a person took control: the runtime reports it
    except Exception as exc:  # noqa: BLE001 - whatever broke, nothing is proven about the credential
        logger.warning("browser_login did not complete: %s", type(exc).__name__)
        stopped = NotCompleted(BROWSER_ERROR, f"the browser failed during the login ({type(exc).__name__}).")
    finally:
        solver.close()
    try:
        artifact_id = None
        if stopped is None or stopped.on_page:
            # First the capture (the filled fields blurred with the password fields), then the emptying.
            artifact_id = await capture_diagnostic(
                page,
                server=server if server is not None else server_link.in_process(computer_id),
                budget=budget.before(min(EMPTY_RESERVE_SECONDS, budget.left() / 8)),
                cdp=cdp,
                fields=filled.fields,
            )
        await empty_filled(page, filled, budget)
        if stopped is None:
            return _result(REFUSED, artifact_id=artifact_id)
        return {"tool_result": not_completed(stopped.code, stopped.what, artifact_id=artifact_id)}
    finally:
        if cdp is not None:
            # Detaching waits while a navigation is pending: never on the budget's time.
            detach_later(cdp)


async def _fill(guard: Guard, filled: Filled, element: ElementHandle, value: str, what: str) -> None:
    """Type ``value`` into ``element`` (checked at that moment), recorded as filled first."""
    filled.add(element, value)
    await guard.fill(element, value, what)


async def _login(
    page: Page,
    cdp: CDPSession,
    args: BrowserLoginArgs,
    account_id: str,
    computer_id: str,
    grant: str,
    budget: Budget,
    solver: Solver,
    progress: dict[str, str],
    filled: Filled,
) -> str | None:
    """The masked username once signed in; None when the portal refused; raises otherwise."""
    if any(frame_piercing(s) for s in (args.usernameSelector, args.passwordSelector, args.submitSelector)):
        raise OriginRefused("A selector that enters a frame was refused; credentials are typed only into the top page.")
    if isinstance(solver, SolverNotConfigured):
        raise NotCompleted(
            PROVIDER_NOT_CONFIGURED,
            "the run asks for captcha solving, and this computer's managed browser session was created with "
            "its provider's captcha solver off (the computer's solve_captcha option); nothing was read or typed.",
        )
    if not grant:
        # The executor holds no Vault token of its own: without the call's grant nothing is read.
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault could not be asked for the credential (no read grant came with this call); nothing was typed.",
        )
    secret = await _read_secret(account_id, args.credentialId, grant, budget)
    if secret is None:
        raise NotCompleted(
            CREDENTIAL_NOT_FOUND, "no portal credential with that id is stored for this account; nothing was typed."
        )
    guard = Guard(page, cdp, secret.origins)
    if not origin_allowed(await guard.top_origin(), secret.origins):
        raise OriginRefused(
            "This credential may not be typed into the current page's origin. Navigate to the portal's login page first."
        )
    username_locator = await _field(page, args.usernameSelector, USERNAME_SELECTORS, budget)
    password_locator = await _field(page, args.passwordSelector, PASSWORD_SELECTORS, budget)
    if password_locator is None:
        raise NotCompleted(LOGIN_FORM_NOT_FOUND, "no password field was found on the current page; nothing was typed.")
    # Fixed elements: a password is typed only into the password input that was checked.
    password_field = await password_locator.element_handle(timeout=budget.ms(10_000))
    username_field = await username_locator.element_handle(timeout=budget.ms(10_000)) if username_locator else None
    if not await password_field.evaluate("el => el instanceof HTMLInputElement && el.type === 'password'"):
        raise NotCompleted(
            LOGIN_FORM_NOT_FOUND, "passwordSelector must select a password input (type=password); nothing was typed."
        )
    fields = [f for f in (username_field, password_field) if f is not None]
    submit = await _field(page, args.submitSelector, SUBMIT_SELECTORS, budget)
    control = await submit.element_handle(timeout=budget.ms(10_000)) if submit is not None else None
    # Before anything is typed: the form sends with POST to one of the credential's origins.
    await check_submission(guard, fields, control)
    # Before the submit: never spend a password attempt while a challenge is up.
    progress["waiting"] = "captcha"
    if not await wait_for_solver(solver, budget):
        raise NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED + " Nothing was submitted.")
    progress["waiting"] = "portal"
    filled.password = password_field
    if username_field is not None:
        await _fill(guard, filled, username_field, secret.username, "username")
    await _fill(guard, filled, password_field, secret.password, "password")
    if budget.spent:
        raise OutOfBudget
    # Again right before the submit: typing may have made the page's script change the form.
    await check_submission(guard, fields, control)
    filled.described = list((await signals(password_field, []))["described"])
    answered = lambda: form_answered(page, filled)  # noqa: E731
    if control is not None:
        # A control that is not the form's submit control (a toggle, a cell) is clicked too; then only
        # the fields' fate can make the answer a sign-in.
        await guard.check(control, "submit")
        clicked = control
        await _settled_after(
            page, budget, answered, lambda: clicked.click(timeout=budget.ms(10_000), no_wait_after=True)
        )
    else:
        # No submit control: submit the password's form as a click would (validation and submit events).
        await guard.check(password_field, "password")
        await _settled_after(
            page, budget, answered, lambda: password_field.evaluate("el => el.form ? el.form.requestSubmit() : null")
        )
    # After the submit: the post-credential challenge is the common case.
    if not isinstance(solver, NoSolver):
        progress["waiting"] = "captcha"
        if not await wait_for_solver(solver, budget, settle=0.5):
            raise NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED)
        progress["waiting"] = "portal"
        await _settled_after(page, budget, answered, None)
    if secret.totp_secret:
        otp = await first_visible(page, OTP_SELECTORS, budget)
        if otp is not None:
            # Checked again right before the code: a post-submit redirect may have left the origins.
            code_field = await otp.element_handle(timeout=budget.ms(10_000))
            await guard.check(code_field, "one-time code")
            await check_submission(guard, [code_field], None)
            await _fill(guard, filled, code_field, totp(secret.totp_secret), "one-time code")
            await guard.check(code_field, "one-time code")

            async def code_answered() -> bool:
                return not (await fate(code_field))["shown"]

            await _settled_after(
                page,
                budget,
                code_answered,
                lambda: code_field.evaluate(
                    "el => el.form ? el.form.requestSubmit() : el.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))"
                ),
            )
    if await verdict(page, guard, filled, secret, budget):
        return mask_username(secret.username)
    return None


NAVIGATION_START_WINDOW = 1.5


async def _settled_after(
    page: Page,
    budget: Budget,
    answered: Callable[[], Awaitable[bool]],
    action: Callable[[], Awaitable[Any]] | None,
) -> None:
    """Do ``action``, then wait for a navigation it starts to commit and load.

    A navigation that has not finished when the budget ends is a login
    timeout (a slow portal or one still loading), never a refusal.
    """
    started, committed = asyncio.Event(), asyncio.Event()

    def on_request(request: Request) -> None:
        if request.is_navigation_request() and request.frame == page.main_frame:
            started.set()

    def on_navigated(frame: Frame) -> None:
        if frame == page.main_frame:
            committed.set()

    page.on("request", on_request)
    page.on("framenavigated", on_navigated)
    try:
        if action is not None:
            await action()
        try:
            await asyncio.wait_for(started.wait(), timeout=min(NAVIGATION_START_WINDOW, budget.left()))
        except TimeoutError:
            # No navigation: a script-driven form answers in place. Wait for a clear signal (the
            # filled password field gone, hidden or changed, a refusal tied to its form, or a late
            # navigation); none in budget is a timeout.
            while not started.is_set():
                if await answered():
                    return
                if budget.left() < 0.1:
                    raise OutOfBudget from None
                await asyncio.sleep(min(0.2, budget.left()))
        try:
            await asyncio.wait_for(committed.wait(), timeout=budget.left())
            await page.wait_for_load_state("load", timeout=budget.ms())
        except Exception:  # noqa: BLE001 - any wait that ends with the budget is a timeout
            raise OutOfBudget from None
    finally:
        page.remove_listener("request", on_request)
        page.remove_listener("framenavigated", on_navigated)
