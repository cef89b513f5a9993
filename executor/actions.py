"""What can be done to the page: the person's inputs and the agent's actions.

The transport (``rpc.py``, ``handlers.py``) knows nothing of individual actions: it looks
them up here. A new agent action is one decorated function with its argument
model in ``contracts.py``; an agent tool that drives the browser names its
action in ``runs/tools.py`` and shares that model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from playwright.async_api import Page
from pydantic import BaseModel

from executor import contracts as c
from executor import egress, login, login_codes, masking, ops, taint
from executor.backends.base import BrowserBackend
from executor.control import ControlError
from executor.server_link import BindingChanged, ServerLink
from executor.wire import BROWSER_LOGIN_MARGIN_SECONDS, CALL_TIMEOUT_SECONDS
from vault_bridge.credentials import mask_username

NAVIGATE_TIMEOUT_MS = 7_000
SELECTOR_TIMEOUT_MS = 10_000
MAX_EXTRACTED_CHARS = 100_000
RELEASE_TIMEOUT_SECONDS = 2.0
# Waits, frame by frame, until the page has moved from ``before`` and then holds still (or 60 frames pass).
SETTLED_SCROLL = """async (before) => {
  const at = () => [window.scrollX, window.scrollY];
  const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
  let last = at(), still = 0, moved = false;
  for (let i = 0; i < 60 && still < 3; i++) {
    await frame();
    const now = at();
    moved = moved || now[0] !== before[0] || now[1] !== before[1];
    still = moved && now[0] === last[0] && now[1] === last[1] ? still + 1 : 0;
    last = now;
  }
  return last;
}"""


async def navigate(page: Page, url: str) -> None:
    """Go to ``url`` and wait for DOMContentLoaded, at most 7 s.

    A navigation (or a redirect of it) that the egress policy refused is an
    error naming the policy, never a page showing the proxy's refusal.
    """
    proxy = egress.proxy_of(page.context)
    started = time.monotonic()
    try:
        response = await page.goto(url, wait_until="domcontentloaded", timeout=NAVIGATE_TIMEOUT_MS)
    except Exception:
        refused = proxy.refused_since(started) if proxy is not None else None
        if refused is not None:
            raise _egress_refused(refused) from None
        failed = proxy.upstream_failed_since(started) if proxy is not None else None
        if failed is not None:
            raise _upstream_failed(failed) from None
        raise
    marker = response.headers.get(egress.REFUSED_HEADER.lower()) if response is not None else None
    if marker == "refused" and proxy is not None:
        raise _egress_refused(proxy.refused_since(started) or "the destination")
    if marker == egress.UPSTREAM_FAILED and proxy is not None:
        raise _upstream_failed(proxy.upstream_failed_since(started) or "it did not carry the request")


def _upstream_failed(why: str) -> ControlError:
    return ControlError(f"The computer's upstream proxy failed: {why}.", "upstream_proxy_failed")


def _egress_refused(target: str) -> ControlError:
    return ControlError(
        f"The browser's egress policy refused {target}: computers reach only public addresses "
        "(RAM_BROWSER_EGRESS_ALLOW opens exceptions).",
        "egress_refused",
    )


# --- The person's inputs (jpeg-websocket-v1) --------------------------------

# The one-character keys Playwright's keyboard (a US layout) can press: printable
# ASCII, and Enter as "\n"/"\r". Control characters with a key of their own are
# pressed as that key; any other character (é, ç, €, 中, NBSP, a combining accent)
# has no US key and is pressed through CDP as a person's keyboard layout would
# produce it: a keydown carrying the character as its text, then a keyup.
_US_CHARACTERS = frozenset(chr(code) for code in range(0x20, 0x7F)) | {"\n", "\r"}
_CONTROL_KEYS = {"\t": "Tab", "\b": "Backspace", "\x1b": "Escape", "\x7f": "Delete"}


def playwright_key(key: str) -> str | None:
    """The name Playwright's keyboard presses for a contract ``key``; ``None`` for text-only characters."""
    if len(key) != 1 or key in _US_CHARACTERS:
        return key
    return _CONTROL_KEYS.get(key)


@dataclass
class Held:
    """Keys and mouse buttons a person pressed and has not released, and under which grant.

    Released through the page's own Playwright keyboard and mouse (which keep their
    own modifier state) when control ends, before anyone else acts.
    """

    grant_id: str = ""
    keys: dict[str, None] = field(default_factory=dict)
    buttons: dict[str, None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.keys or self.buttons)


async def release_held(page: Page, held: Held) -> None:
    """Release every key (last pressed first) and button still down; quiet on a failed browser."""
    keys, buttons = list(held.keys), list(held.buttons)
    held.keys.clear()
    held.buttons.clear()
    # Each bounded: a page a dialog blocks acknowledges no input until the dialog is answered.
    for key in reversed(keys):
        with contextlib.suppress(Exception):
            async with asyncio.timeout(RELEASE_TIMEOUT_SECONDS):
                await page.keyboard.up(key)
    for button in buttons:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(RELEASE_TIMEOUT_SECONDS):
                await page.mouse.up(button=button)  # type: ignore[arg-type]


async def _layout_key(page: Page, key: str, phase: str) -> None:
    """A character with no US key (Playwright's keyboard refuses it): its keydown (which types it) or keyup."""
    cdp = await page.context.new_cdp_session(page)
    try:
        if phase == "down":
            await cdp.send(
                "Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": key, "unmodifiedText": key}
            )
        else:
            await cdp.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key})
    finally:
        await cdp.detach()


async def human_input(
    page: Page,
    value: c.PointerInput | c.TextInput | c.KeyInput | c.WheelInput | c.NavigateInput,
    held: Held | None = None,
) -> None:
    """Dispatch one input; returns only when the browser has processed it."""
    held = held if held is not None else Held()
    if isinstance(value, c.PointerInput):
        await page.mouse.move(value.x, value.y)
        if value.phase == "down":
            held.buttons[value.button] = None
            await page.mouse.down(button=value.button)
        elif value.phase == "up":
            held.buttons.pop(value.button, None)
            await page.mouse.up(button=value.button)
    elif isinstance(value, c.TextInput):
        if value.text:
            await page.keyboard.insert_text(value.text)
    elif isinstance(value, c.KeyInput):
        key = playwright_key(value.key)
        if key is None:
            await _layout_key(page, value.key, value.phase)
        elif value.phase == "down":
            held.keys[key] = None
            await page.keyboard.down(key)
        else:
            held.keys.pop(key, None)
            await page.keyboard.up(key)
    elif isinstance(value, c.WheelInput):
        await page.mouse.wheel(value.delta_x, value.delta_y)
    elif isinstance(value, c.NavigateInput):
        await navigate(page, value.url)


# --- The agent's actions -----------------------------------------------------


@dataclass(frozen=True)
class AgentAction:
    name: str
    args: type[BaseModel]
    # ``run(act, args)``, or ``run(act, args, context)`` for an action with a context model.
    run: Callable[..., Awaitable[dict[str, Any]]]
    # Exports produce data from the page; a takeover aborts them (and counts them apart).
    export: bool = False
    # The executor's limit for one call of this action (the internal default is 25 s).
    timeout_seconds: Callable[[], float] = lambda: CALL_TIMEOUT_SECONDS
    # Settings of the run the action needs besides the agent's arguments (never from the model).
    context: type[BaseModel] | None = None
    # Runs while a dialog blocks the active page (answering it, the tab actions); every other
    # action is refused then (``dialog_open``), and stops waiting when its page opens a dialog.
    beside_dialog: bool = False

    def bind(
        self, args: dict[str, Any], context: dict[str, Any] | None
    ) -> Callable[[ActionContext], Awaitable[dict[str, Any]]]:
        """Validate the arguments (and context) now; the returned call runs the action with what it acts on."""
        parsed = self.args.model_validate(args)
        if self.context is None:
            return lambda act: self.run(act, parsed)
        settings_ = self.context.model_validate(context or {})
        return lambda act: self.run(act, parsed, settings_)


AGENT_ACTIONS: dict[str, AgentAction] = {}


class Browser(Protocol):
    """What the runtime offers actions beyond the active page: its tabs and dialogs."""

    async def tabs_describe(self) -> list[dict[str, Any]]: ...
    async def tab_switch(self, tab_id: str) -> None: ...
    async def tab_close(self, tab_id: str) -> None: ...
    async def dialog_answer(self, dialog_id: str | None, *, accept: bool, text: str | None) -> dict[str, Any]: ...
    def dialogs_describe(self) -> list[dict[str, Any]]: ...
    def auth_prompt(self, dialog_id: str | None) -> dict[str, Any]: ...
    async def auth_answer(self, dialog_id: str, credentials: tuple[str, str] | None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ActionContext:
    """What one agent action acts on and with, given to its handler by the runtime."""

    page: Page  # the active page when the action was asked for
    computer_id: str
    server: ServerLink  # the executor's link to the server (artifacts, uploads, the binding)
    browser: Browser  # the tabs and dialogs beyond the active page
    # The computer's browser backend: browser_login asks it which captcha solver to wait for.
    backend: BrowserBackend | None = None


def agent_action(
    name: str,
    args: type[BaseModel],
    *,
    export: bool = False,
    timeout_seconds: Callable[[], float] | None = None,
    context: type[BaseModel] | None = None,
    beside_dialog: bool = False,
) -> Callable[..., Any]:
    def register(fn: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[dict[str, Any]]]:
        AGENT_ACTIONS[name] = AgentAction(
            name=name,
            args=args,
            run=fn,
            export=export,
            timeout_seconds=timeout_seconds or (lambda: CALL_TIMEOUT_SECONDS),
            context=context,
            beside_dialog=beside_dialog,
        )
        return fn

    return register


@agent_action("navigate", c.NavigateArgs)
async def _navigate(act: ActionContext, args: c.NavigateArgs) -> dict[str, Any]:
    page = act.page
    await navigate(page, args.url)
    return {"url": page.url, "title": await page.title()}


@agent_action("click", c.ClickArgs)
async def _click(act: ActionContext, args: c.ClickArgs) -> dict[str, Any]:
    page = act.page
    target = args.target()
    if isinstance(target, str):
        await taint.check_selector(page, target)
        await page.locator(target).first.click(timeout=SELECTOR_TIMEOUT_MS)
    else:
        await page.mouse.click(*target)
    return {"url": page.url}


@agent_action("type", c.TypeArgs)
async def _type(act: ActionContext, args: c.TypeArgs) -> dict[str, Any]:
    page = act.page
    await taint.check_selector(page, args.selector)
    await page.locator(args.selector).first.fill(args.text, timeout=SELECTOR_TIMEOUT_MS)
    return {}


@agent_action("press", c.PressArgs)
async def _press(act: ActionContext, args: c.PressArgs) -> dict[str, Any]:
    page = act.page
    # A key on a focused field that holds a secret would edit or submit it in place (executor/taint.py).
    await taint.check_key(page, args.key)
    await page.keyboard.press(args.key)
    return {"url": page.url}


@agent_action("wait_for", c.WaitForArgs)
async def _wait_for(act: ActionContext, args: c.WaitForArgs) -> dict[str, Any]:
    page = act.page
    await taint.check_selector(page, args.selector)
    await page.locator(args.selector).first.wait_for(state="visible", timeout=args.timeout_ms)
    return {}


@agent_action("extract_text", c.ExtractTextArgs, export=True)
async def _extract_text(act: ActionContext, args: c.ExtractTextArgs) -> dict[str, Any]:
    page = act.page
    selector = args.selector or "body"
    await taint.check_selector(page, selector)
    text = await page.locator(selector).first.inner_text(timeout=SELECTOR_TIMEOUT_MS)
    truncated = len(text) > MAX_EXTRACTED_CHARS
    return {"text": text[:MAX_EXTRACTED_CHARS], "truncated": truncated, "url": page.url}


@agent_action("screenshot", c.ScreenshotArgs, export=True, context=c.CaptureContext)
async def _screenshot(act: ActionContext, args: c.ScreenshotArgs, context: c.CaptureContext) -> dict[str, Any]:
    """A masked PNG of the viewport (tainted fields masked by the page's rendering, the run's
    typed-into fields blurred), stored as an artifact of the computer's account; only its id
    leaves the executor."""
    page = act.page
    png = await masking.masked_png(page, selectors=context.mask_selectors)
    artifact_id = await act.server.artifact_store(kind="screenshot", data=png)
    return {"artifact_id": str(artifact_id), "url": page.url}


@agent_action("scroll", c.ScrollArgs)
async def _scroll(act: ActionContext, args: c.ScrollArgs) -> dict[str, Any]:
    """Turn the mouse wheel with the pointer at the viewport's centre."""
    page = act.page
    size = page.viewport_size or {"width": c.VIEWPORT_WIDTH, "height": c.VIEWPORT_HEIGHT}
    await page.mouse.move(size["width"] / 2, size["height"] / 2)
    before = await page.evaluate("() => [window.scrollX, window.scrollY]")
    await page.mouse.wheel(args.delta_x, args.delta_y)
    # The wheel returns before the page has scrolled: report where it settles (at most about a second).
    position = await page.evaluate(SETTLED_SCROLL, before)
    return {"url": page.url, "scroll_x": position[0], "scroll_y": position[1]}


# The index of the first option of the <select> whose value (or label) is exactly the one asked for, or -1.
OPTION_INDEX = """(select, [by, wanted]) => {
  if (!(select instanceof HTMLSelectElement)) return -2;
  return Array.from(select.options).findIndex((o) => (by === "value" ? o.value : o.label) === wanted);
}"""


@agent_action("select_option", ops.SelectOptionArgs)
async def _select_option(act: ActionContext, args: ops.SelectOptionArgs) -> dict[str, Any]:
    """Choose an option of a <select> by its value or its label, as a person would (input and change fire)."""
    page = act.page
    await taint.check_selector(page, args.selector)
    select = page.locator(args.selector).first
    by, wanted = ("value", args.value) if args.value is not None else ("label", args.label)
    index = await select.evaluate(OPTION_INDEX, [by, wanted], timeout=SELECTOR_TIMEOUT_MS)
    if index == -2:
        raise ControlError("The selector matches an element that is not a <select>.", "option_not_found")
    if index < 0:
        raise ControlError(f"The <select> has no option whose {by} is exactly the one given.", "option_not_found")
    await select.select_option(index=index, timeout=SELECTOR_TIMEOUT_MS)
    chosen = await select.evaluate("(s) => { const o = s.options[s.selectedIndex]; return [o.value, o.label]; }")
    return {"url": page.url, "value": chosen[0], "label": chosen[1]}


@agent_action("tabs_list", c.TabsListArgs, beside_dialog=True)
async def _tabs_list(act: ActionContext, args: c.TabsListArgs) -> dict[str, Any]:
    return {"tabs": await act.browser.tabs_describe()}


@agent_action("tab_switch", c.TabArgs, beside_dialog=True)
async def _tab_switch(act: ActionContext, args: c.TabArgs) -> dict[str, Any]:
    browser = act.browser
    await browser.tab_switch(args.tab)
    return {"tabs": await browser.tabs_describe()}


@agent_action("tab_close", c.TabArgs, beside_dialog=True)
async def _tab_close(act: ActionContext, args: c.TabArgs) -> dict[str, Any]:
    browser = act.browser
    await browser.tab_close(args.tab)
    return {"tabs": await browser.tabs_describe()}


@agent_action("upload", c.UploadArgs, context=c.UploadContext)
async def _upload(act: ActionContext, args: c.UploadArgs, context: c.UploadContext) -> dict[str, Any]:
    """Set a file input of the page to a file the harness uploaded to the run's account.

    The server reads it (``uploads/read``) after re-checking the run's binding, for the run's
    account only: another account's artifact, a capture or a download is no such upload.
    """
    page = act.page
    await taint.check_selector(page, args.selector)
    try:
        upload = await act.server.upload_read(
            account_id=context.account_id, binding=context.computer_binding, artifact_id=str(args.artifact_id)
        )
    except BindingChanged:
        raise ControlError("The run's computer binding changed; no file was set.", "binding_changed") from None
    if upload is None:
        raise ControlError("No uploaded file with that artifact_id in this account.", "artifact_not_found")
    await page.locator(args.selector).first.set_input_files(
        {"name": upload.filename, "mimeType": upload.content_type, "buffer": upload.data}, timeout=SELECTOR_TIMEOUT_MS
    )
    return {
        "url": page.url,
        "artifact_id": upload.artifact_id,
        "filename": upload.filename,
        "content_type": upload.content_type,
        "size": upload.size,
    }


@agent_action("dialog_answer", c.DialogAnswerArgs, beside_dialog=True)
async def _dialog_answer(act: ActionContext, args: c.DialogAnswerArgs) -> dict[str, Any]:
    """Answer the dialog a page opened (the active tab's unless ``dialog`` names another)."""
    browser = act.browser
    answered = await browser.dialog_answer(args.dialog, accept=args.accept, text=args.text)
    return {"answered": answered, "dialogs": browser.dialogs_describe()}


# auth_answer's Vault read: bounded so that the answer and the wait for the site fit the action's 25 s.
AUTH_READ_SECONDS = 10.0


@agent_action("auth_answer", c.AuthAnswerArgs, beside_dialog=True, context=c.LoginContext)
async def _auth_answer(act: ActionContext, args: c.AuthAnswerArgs, context: c.LoginContext) -> dict[str, Any]:
    """Answer a site's sign-in prompt: cancel it, or sign in with a vault credential of the run's
    account whose origins include exactly the prompt's origin (read here, never shown to the agent).

    As for browser_login, the run's binding is re-checked right before the read, the read is
    keyed by the run's account and made with the call's one-use grant; a refusal sends nothing
    and the prompt keeps waiting."""
    page = act.page
    browser = act.browser
    prompt = browser.auth_prompt(args.dialog)
    if not args.accept or args.credentialId is None:
        answered = await browser.auth_answer(str(prompt["id"]), None)
        return {"answered": {**answered, "origin": prompt["origin"]}, "dialogs": browser.dialogs_describe()}
    holds = await act.server.binding_holds(account_id=context.account_id, binding=context.computer_binding)
    if not holds:
        return {
            "tool_result": login_codes.auth_not_answered(
                login_codes.BINDING_CHANGED, "the run's computer binding changed; no credential was read."
            )
        }
    try:
        secret = await login.credential_for_origin(
            account_id=context.account_id,
            credential_id=args.credentialId,
            grant=context.vault_grant,
            origin=str(prompt["origin"]),
            budget=login.Budget(AUTH_READ_SECONDS),
        )
    except login.NotCompleted as stopped:
        return {"tool_result": login_codes.auth_not_answered(stopped.code, stopped.what)}
    # Kept for redaction only: a site's page may repeat them (its URL, title or text).
    taint.remember_secrets(page, [secret.username, secret.password])
    answered = await browser.auth_answer(str(prompt["id"]), (secret.username, secret.password))
    answered = {**answered, "origin": prompt["origin"], "username": mask_username(secret.username)}
    return {"answered": answered, "dialogs": browser.dialogs_describe()}


@agent_action(
    "browser_login",
    c.BrowserLoginArgs,
    timeout_seconds=lambda: settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS + BROWSER_LOGIN_MARGIN_SECONDS,
    context=c.LoginContext,
)
async def _browser_login(act: ActionContext, args: c.BrowserLoginArgs, context: c.LoginContext) -> dict[str, Any]:
    """Resolve and type a vault credential of the run's account; see executor.login.

    The run's binding (account, this computer, the computer's binding) comes in the
    action's context from the worker; it is re-checked right before the credential is
    read, and the read is keyed by the run's account.
    """
    page = act.page
    # The budget is what the worker had left, counted from the request's arrival (before the browser's lock).
    total = settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS
    budget = login.Budget(min(context.budget_seconds or total, total), start=context.received_at)
    holds = await act.server.binding_holds(account_id=context.account_id, binding=context.computer_binding)
    if not holds:
        return {
            "tool_result": login_codes.not_completed(
                login_codes.BINDING_CHANGED, "the run's computer binding changed; no credential was read or typed."
            )
        }
    backend = act.backend
    return await login.browser_login(
        page,
        args,
        solver=backend.solver(page, context.browser) if backend is not None else login.NoSolver(),
        account_id=context.account_id,
        computer_id=act.computer_id,
        server=act.server,
        grant=context.vault_grant,
        budget=budget,
    )
