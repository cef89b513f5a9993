"""The agent never observes a secret it shares a page with (executor/taint.py), against real
Chromium and a hostile corpus of login pages (tests/support/hostile_pages.py).

The fields are filled exactly as browser_login fills them (``login.Guard.fill``, which taints
each field right before its value lands). Every agent-visible answer — wait_for outcomes, the
text it reads, the observation, titles, URLs, tabs and dialog texts — is collected twice, with
two different secrets of one length, and must be identical. The pixel tests compare a toggled
field in the screenshot with the masked and the clear renderings of the same value."""

from __future__ import annotations

import base64
import io
import secrets
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PIL import Image, ImageChops

from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor import handlers, login, masking, taint
from executor.runtime import Executor
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor

FIRST = ("alice-x1", "Tr0ub4dor&3x")
SECOND = ("bobby-y2", "Hunter2!Hunt")
# Each one matches the page with FIRST filled in and not with SECOND: an oracle on today's main.
ORACLES = [
    "internal:role=row[name=/Username: a/]",  # a table row's name includes its inputs' values
    "role=row[name=/Password: T/]",  # type=password counts as a textbox too
    "internal:role=button[name=/^a/]",  # aria-labelledby and role=button wrappers
    "internal:role=link[name=/^a/]",  # a link wrapping an input
    'input[value^="a"]',  # a React-style input copying its value to the attribute
    "#pat:invalid",  # pattern="a.*"
    "text=/as a/",  # the echo span
    '#echo:has-text("as a")',
    'xpath=//input[starts-with(@value, "a")]',
    'input[title*="a"], #u[value]',
]
# Not oracles between two filled secrets, but value pseudo-classes all the same: refused too.
VALUE_PSEUDO = ["#pat:placeholder-shown", "#pat:valid", "#pat:in-range", "#echo:empty", "#p:out-of-range"]


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    with serve_hostile() as served:
        allow_egress(served.origin)
        yield served


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("ok", call())
    except ExecutorError as exc:
        return ("error", exc.reason, exc.message)


def fill_like_browser_login(screen: Executor, site: HostileSite, selector: str, value: str) -> None:
    async def fill() -> None:
        page = screen.page
        cdp = await page.context.new_cdp_session(page)
        try:
            guard = login.Guard(page, cdp, (login.normal_origin(site.origin) or "",))
            for handle in await page.query_selector_all(selector):
                await guard.fill(handle, value, "username")
        finally:
            await cdp.detach()

    on_executor(screen, fill)


def answers(screen: Executor, site: HostileSite, secret: tuple[str, str]) -> dict[str, Any]:
    """What an agent sees on the hostile login page with ``secret`` typed into it."""
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        fill_like_browser_login(screen, site, ".user", secret[0])
        fill_like_browser_login(screen, site, "#p", secret[1])
        seen: dict[str, Any] = {}
        for selector in [*ORACLES, *VALUE_PSEUDO]:
            executor.lease_renew(lease)  # today's engines wait out each timeout
            seen[selector] = outcome(lambda s=selector: executor.wait_for(lease, s, timeout_ms=300))
            seen["extract " + selector] = outcome(lambda s=selector: executor.extract_text(lease, s))
            seen["click " + selector] = outcome(lambda s=selector: executor.click(lease, s))
        # Value-blind selectors work as always.
        seen["blind"] = [
            outcome(lambda: executor.wait_for(lease, "#u", timeout_ms=2000)),
            outcome(lambda: executor.wait_for(lease, "table tr:nth-child(2) > td input[type=password]")),
            outcome(lambda: executor.extract_text(lease, "#echo")),
        ]
        seen["text"] = outcome(lambda: executor.extract_text(lease))
        observed = executor.observe(100_000)
        seen["observe"] = {key: observed[key] for key in ("url", "title", "text", "tabs")}
        seen["tabs"] = executor.action(lease, "tabs_list")
        # The show-password toggle: the field is still masked and still tainted.
        seen["toggle"] = outcome(lambda: executor.click(lease, "#eye"))
        seen["after toggle"] = [outcome(lambda s=s: executor.wait_for(lease, s, timeout_ms=300)) for s in ORACLES]
        # A dialog that repeats a value.
        opened = executor.click(lease, "#hello")["dialog_opened"]
        seen["dialog"] = (opened["kind"], opened["message"])
        executor.action(lease, "dialog_answer", accept=True)
        return seen
    finally:
        executor.lease_release(lease)


def test_every_agent_visible_answer_is_the_same_for_two_secrets_of_one_length(
    screen: Executor, site: HostileSite
) -> None:
    first = answers(screen, site, FIRST)
    second = answers(screen, site, SECOND)
    for key in first:
        assert first[key] == second[key], key
    # And the answers say why: a code of its own, with the rule.
    for selector in [*ORACLES, *VALUE_PSEUDO]:
        assert first[selector][:2] == ("error", taint.REASON), selector
    assert [answer[0] for answer in first["blind"]] == ["ok", "ok", "ok"]
    assert "[redacted]" in first["text"][1] and FIRST[0] not in str(first)
    assert FIRST[1] not in str(first) and SECOND[0] not in str(second)


def test_outside_the_window_every_engine_works_as_today(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        # Nothing filled: role, text and value selectors are allowed and match as Playwright does.
        assert executor.wait_for(lease, "internal:role=row[name=/Username:/]", timeout_ms=2000) == {}
        assert executor.wait_for(lease, "#pat:placeholder-shown", timeout_ms=2000) == {}
        fill_like_browser_login(screen, site, "#p", FIRST[1])
        with pytest.raises(ExecutorError) as refused:
            executor.wait_for(lease, "internal:role=row[name=/Username:/]", timeout_ms=300)
        assert refused.value.reason == taint.REASON
        # The field emptied (as a failed login does): the window closes.
        on_executor(screen, lambda: screen.page.fill("#p", ""))
        assert executor.wait_for(lease, "internal:role=row[name=/Password:/]", timeout_ms=2000) == {}
        # A new document without the secret: likewise.
        executor.navigate(lease, site.origin + "/blank")
        with pytest.raises(ExecutorError) as absent:
            executor.wait_for(lease, "internal:role=row[name=/Username:/]", timeout_ms=300)
        assert absent.value.reason != taint.REASON
    finally:
        executor.lease_release(lease)


def test_tainted_fields_are_named_by_backend_node_id_and_include_swapped_clones(
    screen: Executor, site: HostileSite
) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/toggle")
        before = on_executor(screen, lambda: taint.tainted_nodes(screen.page))
        # Every field that is type=password is tainted from the start (swap, clone, ref-masked).
        assert len(before) == 3
        executor.click(lease, "#eye2")  # the clone replaces the password input
        after = on_executor(screen, lambda: taint.tainted_nodes(screen.page))
        assert len(after) == 3 and set(after) != set(before)
        executor.click(lease, "#eye")  # a type swap keeps the node, and its taint
        assert len(on_executor(screen, lambda: taint.tainted_nodes(screen.page))) == 3
    finally:
        executor.lease_release(lease)


def _crop(png: bytes, top: int) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB").crop((41, top + 1, 439, top + 39))


def _same(a: Image.Image, b: Image.Image) -> bool:
    return ImageChops.difference(a, b).getbbox() is None


def test_a_toggled_or_cloned_field_is_masked_in_every_picture(screen: Executor, site: HostileSite) -> None:
    """The screenshot tool's PNG and a raw frame of the screen feed (CDP, as the screencast
    captures it) show the toggled and the cloned fields exactly as the masked reference renders
    the same value — never as the clear one (rendered before the executor knew the value: a
    field that shows a known secret is masked too, see tests/executor/test_taint_echo.py)."""
    async def raw() -> bytes:
        cdp = await screen.page.context.new_cdp_session(screen.page)
        try:
            return base64.b64decode((await cdp.send("Page.captureScreenshot", {"format": "png"}))["data"])
        finally:
            await cdp.detach()

    secret = "".join(secrets.choice(string.ascii_letters) for _ in range(12))
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/toggle")
        on_executor(screen, lambda: screen.page.evaluate("v => { document.body.dataset.v = v }", secret))
        executor.click(lease, "#refs")
        clear = _crop(on_executor(screen, raw), 280)
        fill_like_browser_login(screen, site, "#swap", secret)
        fill_like_browser_login(screen, site, "#clone", secret)
        executor.click(lease, "#refs")
        executor.click(lease, "#eye")
        executor.click(lease, "#eye2")
        types = on_executor(screen, lambda: screen.page.evaluate("[swap.type, clone.type]"))
        assert types == ["text", "text"]

        async def pictures() -> list[bytes]:
            return [await masking.masked_png(screen.page), await raw()]

        for picture in on_executor(screen, pictures):
            masked = _crop(picture, 200)
            assert not _same(masked, clear)
            assert _same(_crop(picture, 40), masked)
            assert _same(_crop(picture, 120), masked)
            # The page's own clear copy of the value is masked too.
            assert _same(_crop(picture, 280), masked)
    finally:
        executor.lease_release(lease)


def test_a_page_that_removes_the_mask_gets_it_back(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/toggle")
        fill_like_browser_login(screen, site, "#swap", FIRST[1])
        executor.click(lease, "#eye")
        style = on_executor(
            screen,
            lambda: screen.page.evaluate(
                """async () => { swap.style.cssText = '-webkit-text-security: none !important';
                   swap.removeAttribute('style'); await new Promise(requestAnimationFrame);
                   return getComputedStyle(swap).webkitTextSecurity; }"""
            ),
        )
        assert style == "disc"
    finally:
        executor.lease_release(lease)


def test_a_field_a_person_types_into_is_tainted(screen: Executor, site: HostileSite) -> None:
    """A person's keys (op_input under a grant) taint the focused field before they land."""
    executor = client()
    lease = executor.lease_acquire()
    executor.navigate(lease, site.origin + "/login")
    executor.lease_release(lease)

    async def person_types() -> bool:
        grant, _ = await screen.control.takeover()
        await screen.page.focus("#pat")
        for key in "abc":
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "key", "key": key, "phase": "down"}})
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "key", "key": key, "phase": "up"}})
        masked = await screen.page.evaluate("getComputedStyle(pat).webkitTextSecurity")
        screen.control.grant_release(grant.id)
        return masked == "disc" and await taint.held(screen.page)

    assert on_executor(screen, person_types)
    lease = executor.lease_acquire()
    try:
        with pytest.raises(ExecutorError) as refused:
            executor.wait_for(lease, "#pat:invalid", timeout_ms=300)
        assert refused.value.reason == taint.REASON
    finally:
        executor.lease_release(lease)


# --- The grammar, without a browser ------------------------------------------------------------

BLIND = [
    "#u",
    "input[type=password]",
    "form#f > table tr:nth-child(2n+1) td + td input",
    "input[name='username']",
    "[data-q~=who]",
    "button:not([disabled]):first-of-type",
    "div:has(> input[type=password])",
    "*",
    "a.link, button.go",
    "input:checked ~ label",
    ".x:is(.y, #z):where(p)",
    "li:nth-last-of-type(3)",
    "input:visible",
]
NOT_BLIND = [
    "text=Sign in",
    "internal:role=row[name=/al/]",
    "role=button",
    "internal:label=Password",
    "internal:text=x",
    "xpath=//input",
    "//input",
    '"Sign in"',
    "button:has-text('Go')",
    "p:text('x')",
    "input[value]",
    "input[VALUE='x']",
    "input[value^=a]",
    "input[title^=a]",
    "input[title*=a]",
    "input[title$=a]",
    "input[lang|=en]",
    "input:placeholder-shown",
    "input:invalid",
    "input:valid",
    "input:in-range",
    "input:out-of-range",
    "div:empty",
    "input:autofill",
    "div:has(input:invalid)",
    "p::before",
    "#u >> nth=0",
    "#u >> text=x",
    "input[name=\\61]",
    "id=u",
    "data-testid=x",
    "input:nth-child(2 of .x)",
    "",
    "   ",
]


@pytest.mark.parametrize("selector", BLIND)
def test_the_value_blind_grammar_accepts_plain_structural_css(selector: str) -> None:
    assert taint.value_blind(selector)


@pytest.mark.parametrize("selector", NOT_BLIND)
def test_the_value_blind_grammar_refuses_engines_value_attributes_and_value_pseudo_classes(selector: str) -> None:
    assert not taint.value_blind(selector)


class _Context:
    """Stands for a browser context: redaction reads only the strings remembered for it."""


class _Tab:
    def __init__(self) -> None:
        self.context = _Context()


def test_redaction_replaces_every_form_of_a_known_secret() -> None:
    page: Any = _Tab()
    taint.remember_secrets(page, ["alice@example.com", "p@ss w0rd"])
    try:
        assert taint.redact({"url": "https://x/?u=alice%40example.com&p=p%40ss+w0rd", "t": ["ALICE@example.com"]}) == {
            "url": "https://x/?u=[redacted]&p=[redacted]",
            "t": ["[redacted]"],
        }
    finally:
        taint.forget_context(page.context)
    assert taint.redact("alice@example.com") == "alice@example.com"


def test_the_username_browser_login_filled_is_masked_like_the_password(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        fill_like_browser_login(screen, site, "#u", FIRST[0])
        masks = on_executor(
            screen,
            lambda: screen.page.evaluate(
                "[u.type, getComputedStyle(u).webkitTextSecurity, getComputedStyle(react).webkitTextSecurity]"
            ),
        )
        # A text field it filled shows discs; one it did not fill shows what it holds.
        assert masks == ["text", "disc", "none"]
        assert len(on_executor(screen, lambda: taint.tainted_nodes(screen.page))) == 2  # #u and the password #p
    finally:
        executor.lease_release(lease)
