"""browser_login against a hostile corpus, in real Chromium with the credential in a real OpenBao.

Each page tries to make the verdict wrong (a toggle taken for a sign-in, an unrelated alert taken
for a refusal, a second step taken for a success) or to make the credential travel where it must
not (a GET form puts it in the address, an ``action`` or ``formaction`` on another origin), or to
leave it in the page for the agent to probe after the answer. The rules under test: the verdict
comes from the filled fields' fate; every answer but success leaves the fields it filled empty; a
form is submitted only with POST to one of the credential's origins.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote_plus

import pytest
from PIL import Image

from accounts.models import Account
from computers.models import DiagnosticArtifact
from executor.runtime import Executor
from tests.executor import test_login as base
from tests.support.portals import PASSWORD, USERNAME, Portal, serve_portal
from tests.support.screen import executor_on, on_executor
from tests.support.tiers import live

REFUSED = "The portal refused the credential"
# The login suite's portal, credentials and run helpers.
portal = base.portal
login_setup = base.login_setup
run_login = base.run_login
result_of = base.result_of


@pytest.fixture(scope="module")
@live
def executor() -> Iterator[Executor]:
    """One backend is enough here: the origin checks on both are test_login.py's."""
    yield from executor_on("local")


@pytest.fixture
def away(portal: Portal, allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as other:
        allow_egress(other.origin)
        portal.away = other.origin
        yield other


def values(screen: Executor) -> list[str]:
    """Every input's current value in every frame of the computer's page."""

    async def read() -> list[str]:
        found: list[str] = []
        for frame in screen.page.frames:
            found += await frame.eval_on_selector_all("input, textarea", "els => els.map(e => e.value)")
        return found

    return list(on_executor(screen, read))


def value_attributes(screen: Executor) -> list[str]:
    return list(
        on_executor(
            screen,
            lambda: screen.page.eval_on_selector_all("input", "els => els.map(e => e.getAttribute('value') || '')"),
        )
    )


def assert_emptied(screen: Executor) -> None:
    """Nothing of the credential stays in the page: not in a field's value, not in a value attribute."""
    held = values(screen) + value_attributes(screen)
    assert PASSWORD not in held and USERNAME not in held, "a filled field still holds the credential"


def assert_refusal(result: dict[str, Any]) -> None:
    assert result["isError"] is False and result["content"].startswith(REFUSED), result
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()


def credential_sent(served: Portal) -> bool:
    """Whether the credential reached a portal in any request (a query or a POST body)."""
    forms = {USERNAME, PASSWORD, quote_plus(USERNAME), quote_plus(PASSWORD)}
    posted = [str(p) for p in served.posts]
    return any(f in seen for f in forms for seen in [*served.gets, *posted])


def test_a_table_row_form_that_refuses_in_place_is_a_refusal_and_is_left_empty(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/table")
    result = result_of(run)
    assert_refusal(result)
    assert_emptied(screen)
    # The capture was taken before the emptying, with the filled username blurred too (not only passwords).
    box = on_executor(screen, lambda: screen.page.locator("input[name=username]").bounding_box())
    stored = Image.open(io.BytesIO(bytes(DiagnosticArtifact.objects.get(pk=result["artifact_id"]).data))).convert("L")

    async def sharp() -> bytes:
        await screen.page.fill("input[name=username]", USERNAME)
        return await screen.page.screenshot(type="png")

    clear = Image.open(io.BytesIO(on_executor(screen, sharp))).convert("L")
    inner = (int(box["x"]) + 2, int(box["y"]) + 2, int(box["x"] + box["width"]) - 2, int(box["y"] + box["height"]) - 2)
    assert base._edge_energy(clear, inner) > 5 * max(base._edge_energy(stored, inner), 0.1)


def test_a_show_password_toggle_as_submit_is_not_a_sign_in(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/toggle", submitSelector="#eye")
    result = result_of(run)
    assert result["isError"] is True, "a toggle that submitted nothing was answered as a sign-in"
    assert result["code"] == "browser.login_unconfirmed", result
    assert portal.posts == []
    assert_emptied(screen)


def test_a_toggle_that_swaps_in_a_clear_clone_is_not_a_sign_in(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/clone", submitSelector="#eye")
    result = result_of(run)
    assert result["isError"] is True and result["code"] == "browser.login_unconfirmed", result
    assert portal.posts == []
    assert_emptied(screen)


def test_a_get_form_is_refused_and_nothing_is_sent(login_setup: Account, portal: Portal, screen: Executor) -> None:
    run = run_login(login_setup, portal, "/get-form")
    result = result_of(run)
    assert result["isError"] is True and result["code"] == "browser.origin_refused", result
    assert "GET" in result["content"]
    assert not credential_sent(portal), "the credential reached the portal in a request"
    assert_emptied(screen)


@pytest.mark.parametrize("path", ["/cross-action", "/cross-formaction"])
def test_a_form_that_posts_to_another_origin_is_refused(
    login_setup: Account, portal: Portal, away: Portal, screen: Executor, path: str
) -> None:
    run = run_login(login_setup, portal, path)
    result = result_of(run)
    assert result["isError"] is True and result["code"] == "browser.origin_refused", result
    assert away.posts == [] and portal.posts == []
    assert not credential_sent(away)
    assert_emptied(screen)


def test_a_django_style_re_render_with_aria_invalid_is_a_refusal(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/django")
    assert_refusal(result_of(run))
    assert [p["path"] for p in portal.posts] == ["/django"]
    # The re-rendered form echoed the username into its value: emptied too.
    assert_emptied(screen)


def test_a_spring_style_redirect_to_login_error_is_a_refusal(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/spring")
    assert_refusal(result_of(run))
    assert portal.gets[-1] == "/spring-login?error"
    assert_emptied(screen)


def test_a_welcome_page_with_an_unrelated_alert_is_a_sign_in(login_setup: Account, portal: Portal) -> None:
    run = run_login(login_setup, portal, "/messages-login")
    assert result_of(run) == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert "You have 3 new messages" in str(run.result)


def test_a_second_step_that_hides_the_filled_password_has_its_own_code(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/mfa")
    result = result_of(run)
    assert result["isError"] is True and result["code"] == "browser.login_step_pending", result
    assert "request_takeover" in result["content"]
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()
    assert_emptied(screen)
