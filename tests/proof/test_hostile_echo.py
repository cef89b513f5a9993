"""The proof's echo row against real Chromium and OpenBao: its page (``/echo-login``, a span that
copies the typed username), its run (navigate, browser_login, screenshot) and its measure
(``echo_problems``) hold on the built masking, and the measure fails on the page's clear rendering."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accounts.models import Account
from computers.models import DiagnosticArtifact
from proof.hostile import echo_problems
from proof.portal import Portal, start_portal
from tests.support.hostile_login import scripted_run, store_credentials
from tests.support.screen import on_executor
from tests.support.tiers import live
from tests.support.vault import VaultServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    served = start_portal()
    allow_egress(served.origin)
    try:
        yield served
    finally:
        served.close()


def test_the_echo_rows_screenshot_shows_no_glyph_of_the_username(
    screen: Any, vault: VaultServer, account: Account, portal: Portal, settings: Any
) -> None:
    store_credentials(vault, account, settings, portal.origin, {"echo": (portal.username, portal.password)})
    steps = [
        {"tool": "navigate", "arguments": {"url": f"{portal.origin}/echo-login"}},
        {"tool": "browser_login", "arguments": {"credentialId": "echo"}, "on_error": "continue"},
        {"tool": "screenshot", "arguments": {}},
        {"tool": "extract_text", "arguments": {"selector": "#echo"}, "on_error": "continue"},
    ]
    run = scripted_run(account, "echo", steps, advances=8)
    results = {step.index: dict(step.result or {}) for step in run.steps.all()}
    assert "refused" in results[1]["content"], results[1]
    # The page echoes the username: the agent reads it redacted.
    assert results[3]["content"].count("[redacted]") == 1 and portal.username not in str(results), results[3]
    artifact = DiagnosticArtifact.objects.get(pk=results[2]["artifact_id"])
    assert echo_problems(bytes(artifact.data)) == []
    # The measure sees glyphs: the same span showing a value of one length the browser never held.
    clear = "x" * len(portal.username)
    on_executor(screen, lambda: screen.page.evaluate("v => { document.getElementById('echo').textContent = v }", clear))
    shown = on_executor(screen, lambda: screen.page.screenshot())
    assert echo_problems(shown) == ["the screenshot shows glyphs of the echoed username"]
