"""What a browser may not do: open with a delegated session, post from another
origin, post without the CSRF token, or follow an open-redirect ``next``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.async_api import Page

from accounts.models import Account
from computers.models import Computer
from runs.models import CredentialRequest, Run
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.vault import VaultServer

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


@pytest.fixture
def credential_run(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> Run:
    return make_paused_run(account, computer, "credential")


async def post_open_from_page(page: Page, run: Run, *, with_token: bool) -> int:
    """A same-origin fetch of the open action, as a script on one of RAM's pages could send it."""
    return int(
        await page.evaluate(
            """async ([path, withToken]) => {
                const body = new URLSearchParams({intent: "open"});
                const field = document.querySelector("input[name=csrfmiddlewaretoken]");
                if (withToken && field) body.set("csrfmiddlewaretoken", field.value);
                const r = await fetch(path, {method: "POST", body, credentials: "same-origin",
                                             referrer: "", referrerPolicy: "same-origin"});
                return r.status;
            }""",
            [f"/tasks/{run.id}/intervention/open", with_token],
        )
    )


async def opened(run: Run) -> bool:
    return (await orm(lambda: CredentialRequest.objects.get(run=run))).opened_at is not None


async def test_delegated_session_cannot_open_an_intervention(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    credential_run: Run,
    runner_key: str,
) -> None:
    leak_guard.watch(runner_key, PASSWORD)
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        response = await client.post(
            "/api/sessions/delegate",
            json={"username": person.username},
            headers={"Authorization": f"Bearer {runner_key}"},
        )
    link = response.json()["url"]
    leak_guard.watch(link.partition("#token=")[2])
    await page.goto(link)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Continue").click()
    assert page.url == f"{human_origin}/"  # home, viewing only
    # The intervention page asks for a password sign-in instead.
    await page.goto(f"{human_origin}/tasks/{credential_run.id}/intervention")
    assert page.url.startswith(f"{human_origin}/accounts/login/")
    assert await post_open_from_page(page, credential_run, with_token=True) == 403
    assert not await opened(credential_run)


async def test_post_from_another_origin_is_refused(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    credential_run: Run,
) -> None:
    leak_guard.watch(PASSWORD)
    await page.goto(f"{human_origin}/tasks/{credential_run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    # Even holding a valid CSRF token, a page of another origin cannot open.
    token = next(c["value"] for c in await page.context.cookies() if c["name"] == "csrftoken")
    with other_origin_form(f"{human_origin}/tasks/{credential_run.id}/intervention/open", token) as evil:
        responses = []
        page.on("response", lambda r: responses.append(r.status) if r.url.endswith("/open") else None)
        async with page.expect_navigation(url="**/open"):
            await page.goto(evil)
    assert responses == [403]
    assert not await opened(credential_run)


async def test_post_without_csrf_token_is_refused(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    credential_run: Run,
) -> None:
    leak_guard.watch(PASSWORD)
    await page.goto(f"{human_origin}/tasks/{credential_run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    assert await post_open_from_page(page, credential_run, with_token=False) == 403
    assert not await opened(credential_run)


@pytest.mark.parametrize("unsafe", ["//evil.example/", "https:evil.example", "\\\\evil.example", "javascript:alert(1)"])
async def test_login_ignores_an_open_redirect_next(
    human_origin: str, page: Page, leak_guard: LeakGuard, person: User, unsafe: str
) -> None:
    leak_guard.watch(PASSWORD)
    await page.goto(f"{human_origin}/accounts/login/?next={quote(unsafe, safe='')}")
    await sign_in(page, person.username, PASSWORD)
    assert page.url == f"{human_origin}/"  # home


@contextmanager
def other_origin_form(action: str, csrf_token: str) -> Iterator[str]:
    """A page on another loopback origin that auto-posts a form to ``action``."""
    page = f"""<!doctype html><form method="post" action="{action}">
<input name="intent" value="open"><input name="csrfmiddlewaretoken" value="{csrf_token}"></form>
<script>document.forms[0].submit()</script>""".encode()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/html")])
        return [page]

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

    httpd = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/"
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
        httpd.server_close()


async def test_vault_form_without_an_invite_explains_and_cannot_save(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    credential_run: Run,
) -> None:
    leak_guard.watch(PASSWORD)
    await page.goto(f"{human_origin}/tasks/{credential_run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    await page.goto(f"{human_origin}/tasks/{credential_run.id}/credential")
    await page.get_by_text("This form has no invite").wait_for()
    assert await page.get_by_role("button", name="Save in the vault").is_disabled()
