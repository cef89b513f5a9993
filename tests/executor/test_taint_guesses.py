"""A hostile agent that guesses a secret the browser holds learns nothing from the answers
(executor/taint.py), against real Chromium and the hostile corpus (tests/support/hostile_pages.py):

* its own strings are checked against the known secrets before anything runs — a navigate URL or
  typed text carrying a right guess is refused, not redacted at the guess's position;
* the secrets stay known when the tab that received them closes, and every tab of the browser
  context is in the window;
* a key on a focused field holding a secret (editing it in place, submitting it) is refused;
* one-time codes never push a username or a password out of memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor import taint
from executor.runtime import Executor
from tests.executor.test_taint import fill_like_browser_login
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor
from tests.support.waits import eventually

USERNAME = "alice-x1"
PASSWORD = "Tr0ub4dor&3x"
ARGUMENTS = "secret_in_arguments"  # taint.ARGUMENTS_REASON
KEY = "secret_field_focused"  # taint.KEY_REASON


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    with serve_hostile() as served:
        allow_egress(served.origin)
        yield served


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def refused(call: Callable[[], Any]) -> ExecutorError:
    with pytest.raises(ExecutorError) as error:
        call()
    return error.value


def test_a_guess_in_the_agents_own_arguments_is_refused_not_redacted(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        fill_like_browser_login(screen, site, ".user", USERNAME)
        fill_like_browser_login(screen, site, "#p", PASSWORD)
        # ~300 candidates in one URL: the right one would come back as [redacted] at its place.
        candidates = [f"bob-{n}" for n in range(5)] + [USERNAME.upper(), "carol-z3"]
        guesses = [
            f"{site.origin}/blank?{'/'.join(candidates)}",
            f"{site.origin}/blank/%61lice-x1",  # the browser decodes %61 before a reply carries the URL
            f"{site.origin}/blank?p={PASSWORD.replace('&', '%26')}",
        ]
        for url in guesses:
            error = refused(lambda u=url: executor.navigate(lease, u))
            assert error.reason == ARGUMENTS
            # It does not say which argument or where, and nothing was done.
            assert USERNAME not in error.message and "url" not in error.message
        assert "/blank" not in screen.page.url
        # A candidate list typed into a field (then probed with a refused selector): refused as well.
        error = refused(lambda: executor.type(lease, "#react", "x y " + USERNAME + " z"))
        assert error.reason == ARGUMENTS
        assert on_executor(screen, lambda: screen.page.evaluate("react.value")) == USERNAME  # nothing typed
        # Every argument counts: a selector, a dialog's text.
        assert refused(lambda: executor.click(lease, f"#{USERNAME}")).reason == ARGUMENTS
        # Wrong guesses go through as ever.
        assert executor.navigate(lease, f"{site.origin}/blank?{'/'.join(candidates[:5])}")["url"].endswith("bob-4")
    finally:
        executor.lease_release(lease)


def test_secrets_outlive_the_tab_that_received_them_and_every_tab_is_in_the_window(
    screen: Executor, site: HostileSite
) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        fill_like_browser_login(screen, site, ".user", USERNAME)
        first = screen.page
        on_executor(screen, lambda: first.evaluate("window.open('/blank')"))
        eventually(lambda: screen.page is not first and screen.page.url.endswith("/blank"), what="the new tab active")
        # The site, still signed in, greets the user by name in the new tab.
        on_executor(screen, lambda: screen.page.evaluate(f"document.body.textContent = 'Howdy, {USERNAME}'"))
        # A second tab is in the window: a text engine is refused there too.
        assert refused(lambda: executor.wait_for(lease, "text=/Howdy, a/", timeout_ms=300)).reason == taint.REASON
        tabs = executor.action(lease, "tabs_list")["tabs"]
        login_tab = next(tab["id"] for tab in tabs if not tab["active"])
        executor.action(lease, "tab_close", tab=login_tab)
        # The tab that received the secret is gone; the secret is still redacted, still in the window.
        text = executor.extract_text(lease)
        assert USERNAME not in text and "[redacted]" in text
        assert refused(lambda: executor.wait_for(lease, "text=/Howdy, a/", timeout_ms=300)).reason == taint.REASON
        assert USERNAME in taint.known_secrets()
    finally:
        executor.lease_release(lease)


@pytest.mark.parametrize("key", ["End", "ArrowLeft", "Backspace", "z", "Enter", "Home"])
def test_a_key_on_a_focused_field_holding_a_secret_is_refused(screen: Executor, site: HostileSite, key: str) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/login")
        fill_like_browser_login(screen, site, "#p", PASSWORD)
        executor.click(lease, "#p")
        error = refused(lambda: executor.press(lease, key))
        assert error.reason == KEY
        # Nothing was edited, nothing submitted.
        assert on_executor(screen, lambda: screen.page.evaluate("[p.value, err.textContent]")) == [PASSWORD, ""]
        # Tab moves focus away; then keys work as ever.
        executor.press(lease, "Tab")
        executor.press(lease, "End")
    finally:
        executor.lease_release(lease)


class _Context:
    """Stands for a browser context: secrets are kept per context."""


class _Tab:
    def __init__(self, context: _Context) -> None:
        self.context = context


def test_one_time_codes_never_push_out_a_username_or_a_password() -> None:
    context = _Context()
    tab: Any = _Tab(context)
    taint.remember_secrets(tab, ["alice@example.com", "p@ss w0rd"])
    try:
        for n in range(40):  # forty TOTP logins
            taint.remember_secrets(tab, [f"{n:06d}"], one_time=True)
        known = taint.known_secrets()
        assert "alice@example.com" in known and "p@ss w0rd" in known
        assert "000039" in known and "000000" not in known
    finally:
        taint.forget_context(context)
    assert "alice@example.com" not in taint.known_secrets()
