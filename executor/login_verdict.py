"""What browser_login typed and what the portal answered: the filled fields, the checks of
where the login form sends them, the verdict (signed in, refused, or not completed), and the
emptying of every field a login that did not sign in filled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import ElementHandle, Locator, Page

from executor.login_budget import Budget, NotCompleted, OutOfBudget
from executor.login_codes import LOGIN_STEP_PENDING, LOGIN_UNCONFIRMED
from executor.login_guard import Guard, OriginRefused, Secret, normal_origin, origin_allowed

logger = logging.getLogger(__name__)

OTP_SELECTORS = [
    "input[autocomplete='one-time-code']",
    "input[name*='otp' i]",
    "input[name*='totp' i]",
    "input[id*='otp' i]",
]
# What a refusal looks like when it is tied to the login form: inside it, right before or after it,
# or named by its fields' aria-describedby / aria-errormessage (an alert elsewhere on a page is not).
ALERT_SELECTOR = "[role='alert'], [role='alertdialog'], .error, .errorlist, .alert-danger, .invalid-feedback"


async def first_visible(page: Page, selectors: list[str], budget: Budget) -> Locator | None:
    """The first visible element matching the heuristic selectors, in order."""
    for selector in selectors:
        locator = page.locator(selector)
        for index in range(await locator.count()):
            candidate = locator.nth(index)
            if await candidate.is_visible():
                return candidate
        if budget.spent:
            raise OutOfBudget
    return None


@dataclass
class Filled:
    """The elements this login typed into and what it typed: the verdict reads their fate, and an
    answer other than success empties them (and any copy of what was typed in the top document)."""

    fields: list[ElementHandle] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)
    password: ElementHandle | None = None
    # What the login form's fields were described by before the submit (aria-describedby texts):
    # help text that was already there is no refusal.
    described: list[str] = field(default_factory=list)

    def add(self, element: ElementHandle, value: str) -> None:
        # Recorded before the value is set: a login stopped in the middle still empties it.
        self.fields.append(element)
        self.typed.append(value)


_SHOWN = (
    "el => !!el && el.isConnected && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden'"
)
# The fate of a filled element: still in the document, rendered, its type, its value.
_FATE = f"""el => ({{connected: el.isConnected, shown: ({_SHOWN})(el), type: String(el.type || ''), value: String(el.value || '')}})"""
# A refusal tied to the login form of ``field``: aria-invalid on its fields, an alert inside the form
# (or right before or after it), or the text of an element its fields name in aria-errormessage, or in
# aria-describedby when that text was not there before the submit (``described``). Also returns the
# aria-describedby texts, the baseline taken before the submit.
_SIGNALS = f"""(field, [alerts, described]) => {{
  const shown = {_SHOWN};
  const text = el => ((el && (el.innerText || el.textContent)) || '').trim();
  const form = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'form').get.call(field);
  const fields = form ? [...form.elements] : [field];
  const texts = [];
  let signal = false;
  for (const f of fields) {{
    const invalid = (f.getAttribute('aria-invalid') || 'false').toLowerCase();
    if (shown(f) && invalid !== 'false' && invalid !== '') signal = true;
    for (const [attribute, always] of [['aria-errormessage', true], ['aria-describedby', false]]) {{
      for (const id of (f.getAttribute(attribute) || '').split(/\\s+/).filter(Boolean)) {{
        const named = document.getElementById(id);
        if (!shown(named) || !text(named)) continue;
        if (!always) texts.push(text(named));
        if (always || !described.includes(text(named))) signal = true;
      }}
    }}
  }}
  if (form) {{
    const near = [...form.querySelectorAll(alerts), form.previousElementSibling, form.nextElementSibling];
    if (near.some(el => el && el.matches(alerts) && shown(el) && text(el))) signal = true;
  }}
  return {{signal, described: texts}};
}}"""
# Where each form that carries the filled fields would send them: its method and resolved action, the
# submitter's formmethod/formaction for its own form. Read through the prototypes' getters, so a field
# named "action" or "method" (which shadows the form's property) cannot hide them.
_SUBMISSIONS = """(_element, [submitter, ...fields]) => {
  const get = (proto, name, el) => Object.getOwnPropertyDescriptor(proto, name).get.call(el);
  const formOf = el => el instanceof HTMLInputElement ? get(HTMLInputElement.prototype, 'form', el)
    : el instanceof HTMLTextAreaElement ? get(HTMLTextAreaElement.prototype, 'form', el)
    : el instanceof HTMLButtonElement ? get(HTMLButtonElement.prototype, 'form', el) : null;
  const control = !!submitter && ((submitter instanceof HTMLButtonElement && get(HTMLButtonElement.prototype, 'type', submitter) === 'submit')
    || (submitter instanceof HTMLInputElement && ['submit', 'image'].includes(get(HTMLInputElement.prototype, 'type', submitter))));
  const own = control ? formOf(submitter) : null;
  const forms = new Set(fields.map(formOf).filter(Boolean));
  if (own) forms.add(own);
  const sends = [...forms].map(form => {
    let method = get(HTMLFormElement.prototype, 'method', form);
    let action = get(HTMLFormElement.prototype, 'action', form);
    if (form === own && submitter.hasAttribute('formmethod')) method = submitter.formMethod;
    if (form === own && submitter.hasAttribute('formaction')) action = submitter.formAction;
    return {method: String(method).toLowerCase(), action: String(action)};
  });
  return {sends, control: !!own && fields.some(f => formOf(f) === own)};
}"""
_CLEAR = """el => {
  if (!el.isConnected) return;
  const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, "");
  el.removeAttribute("value");
  el.dispatchEvent(new InputEvent("input", {bubbles: true, composed: true, inputType: "deleteContent"}));
  el.dispatchEvent(new Event("change", {bubbles: true}));
}"""
_VALUES = "els => els.map(el => [String(el.value || ''), el.getAttribute('value') || ''])"
_CLEAR_AT = f"(els, indices) => indices.forEach(i => ({_CLEAR})(els[i]))"
_PASSWORD_SHOWN = f"() => [...document.querySelectorAll('input')].some(el => el.type === 'password' && ({_SHOWN})(el))"


async def fate(element: ElementHandle | None) -> dict[str, Any]:
    """Whether ``element`` is still in its document, rendered, its type and value (gone: its document went)."""
    gone = {"connected": False, "shown": False, "type": "", "value": ""}
    if element is None:
        return gone
    try:
        return dict(await element.evaluate(_FATE))
    except Exception:  # noqa: BLE001 - its document was replaced (a navigation): the element is gone
        return gone


async def signals(field_element: ElementHandle, described: list[str]) -> dict[str, Any]:
    try:
        return dict(await field_element.evaluate(_SIGNALS, [ALERT_SELECTOR, described]))
    except Exception:  # noqa: BLE001 - gone meanwhile: nothing tied to it
        return {"signal": False, "described": []}


async def check_submission(guard: Guard, fields: list[ElementHandle], submitter: ElementHandle | None) -> bool:
    """Refuse (``OriginRefused``) a form that would send the fields with a method other than POST or
    to an action off the credential's origins. True when ``submitter`` is a submit control of the
    filled fields' own form (a click on anything else submits nothing by itself)."""
    reply = await fields[0].evaluate(_SUBMISSIONS, [submitter, *fields])
    for send in reply["sends"]:
        if send["method"] != "post":
            raise OriginRefused(
                f"The login form would send the credential with method {send['method'].upper()} (GET puts it in "
                "the page's address, where history, tabs and replies carry it), so nothing was submitted."
            )
        if not origin_allowed(normal_origin(send["action"]), guard.origins):
            raise OriginRefused(
                "The login form's action (or its submit button's formaction) is not on one of the credential's "
                "origins, so nothing was submitted."
            )
    return bool(reply["control"])


async def _shown_password_anywhere(page: Page) -> bool:
    """A password field rendered in any frame of the page."""
    for frame in page.frames:
        try:
            if await frame.evaluate(_PASSWORD_SHOWN):
                return True
        except Exception:  # noqa: BLE001, S112 - a frame that went away shows nothing
            continue
    return False


async def _copies(page: Page, typed: list[str]) -> list[int]:
    """The inputs of the top document whose value (or value attribute) is something this login typed."""
    wanted = {value for value in typed if value}
    try:
        found = await page.main_frame.eval_on_selector_all("input, textarea", _VALUES)
    except Exception:  # noqa: BLE001 - the document is being replaced: none to see
        return []
    return [index for index, (value, attribute) in enumerate(found) if value in wanted or attribute in wanted]


async def form_answered(page: Page, filled: Filled) -> bool:
    """A script-driven form has answered: the filled password field left, was hidden or changed type,
    or the form shows a refusal tied to it."""
    password = await fate(filled.password)
    if filled.password is None or not password["shown"] or password["type"] != "password":
        return True
    return bool((await signals(filled.password, filled.described))["signal"])


async def verdict(page: Page, guard: Guard, filled: Filled, secret: Secret, budget: Budget) -> bool:
    """True: signed in; False: refused by the portal; raises ``NotCompleted`` otherwise.

    Success: the filled password field is gone or hidden (and no longer holds the password), no
    password field is rendered in any frame, no filled field still holds what was typed, no field
    of the top document holds a copy of it, and no one-time-code field asks for more. Refusal: the
    login form — the same one, or one re-rendered on the credential's origins — shows a signal
    tied to it. A hidden password field still filled is a step pending.
    """
    password = await fate(filled.password)
    form_field: ElementHandle | None = filled.password if password["shown"] else None
    if form_field is None and origin_allowed(await guard.top_origin(), secret.origins):
        form_field = await _shown_password_field(page)
    if form_field is not None and (await signals(form_field, filled.described))["signal"]:
        return False
    if budget.spent:
        raise OutOfBudget
    # A filled element still in the document with what was typed in it (a detached one keeps its value).
    fates = [await fate(f) for f in filled.fields]
    still = [seen["connected"] and seen["value"] == typed for seen, typed in zip(fates, filled.typed, strict=True)]
    if password["connected"] and not password["shown"] and password["value"] == secret.password:
        raise NotCompleted(
            LOGIN_STEP_PENDING,
            "the portal hid the password field, still filled, and asks for a further step (a second factor "
            "or a one-time code).",
        )
    signed_in = (
        not password["shown"]
        and not any(still)
        and not await _shown_password_anywhere(page)
        and not await _copies(page, [secret.password])
    )
    otp = await first_visible(page, OTP_SELECTORS, budget)
    if signed_in and otp is None:
        return True
    if signed_in or (otp is not None and form_field is None):
        raise NotCompleted(LOGIN_STEP_PENDING, "the portal asks for a one-time code that browser_login cannot give.")
    raise NotCompleted(
        LOGIN_UNCONFIRMED,
        "the page shows neither a sign-in nor a refusal tied to the login form (the password field is still "
        "shown, or a field still holds what was typed).",
    )


async def _shown_password_field(page: Page) -> ElementHandle | None:
    passwords = page.main_frame.locator("input[type='password']")
    for index in range(min(await passwords.count(), 20)):
        if await passwords.nth(index).is_visible():
            return await passwords.nth(index).element_handle(timeout=2_000)
    return None


async def empty_filled(page: Page, filled: Filled, budget: Budget) -> None:
    """Empty every field this login filled, and every field of the top document holding a copy of
    what it typed (value or value attribute); bounded, never raises."""

    async def empty() -> None:
        for element in filled.fields:
            with contextlib.suppress(Exception):
                await element.evaluate(_CLEAR)
        indices = await _copies(page, filled.typed)
        if indices:
            with contextlib.suppress(Exception):
                await page.main_frame.eval_on_selector_all("input, textarea", _CLEAR_AT, indices)

    if not filled.fields:
        return
    try:
        await asyncio.wait_for(empty(), timeout=max(budget.left(), 0.25))
    except Exception as exc:  # noqa: BLE001 - the answer does not wait on a page that does not answer
        logger.warning("browser_login could not empty the fields it filled: %s", type(exc).__name__)
