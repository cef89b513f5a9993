"""Redaction beyond the raw strings (executor/taint.py), against real Chromium: a page that writes
a secret back in its common encodings (base64, base64url, a Basic header's ``user:`` prefix,
``encodeURIComponent``, form encoding, HTML entities), and what a person typed on the screen
(read from the field inside the executor, remembered like a stored secret). Every agent-visible
answer is collected with two different secrets of one length and must be identical."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor import handlers, taint
from executor.runtime import Executor
from tests.executor.test_taint import fill_like_browser_login
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor

# Two secrets of one length whose encodings all differ (the second's needs no percent-escape but "!").
FIRST = "Tr0ub4dor&3x/?"
SECOND = "Hunter2!Hunt+~"


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


def encodings(secret: str) -> list[str]:
    b64 = base64.b64encode(secret.encode()).decode()
    return [
        secret,
        b64,
        b64.replace("+", "-").replace("/", "_").rstrip("="),
        base64.b64encode(b"user:" + secret.encode()).decode(),
        quote(secret, safe="!~*'()"),
        quote(secret, safe="").replace("%20", "+"),
        secret.replace("&", "&amp;"),
    ]


def seen_on_the_encoding_page(executor: ExecutorClient, lease: str) -> dict[str, Any]:
    observed = executor.observe(100_000)
    return {
        "text": outcome(lambda: executor.extract_text(lease)),
        "out": outcome(lambda: executor.extract_text(lease, "#out")),
        "observe": {key: observed[key] for key in ("url", "title", "text", "tabs")},
        "tabs": executor.action(lease, "tabs_list"),
    }


def encoded_answers(screen: Executor, site: HostileSite, secret: str) -> dict[str, Any]:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/encode")
        fill_like_browser_login(screen, site, "#enc", secret)
        seen = seen_on_the_encoding_page(executor, lease)
        # The agent's own arguments carrying an encoded form: refused before anything runs.
        b64 = base64.b64encode(secret.encode()).decode()
        seen["guesses"] = [
            outcome(lambda u=url: executor.navigate(lease, u))[:2]
            for url in (
                f"{site.origin}/blank?auth={b64}",
                f"{site.origin}/blank?auth={base64.b64encode(b'user:' + secret.encode()).decode()}",
                f"{site.origin}/blank?p={quote(secret, safe='')}",
            )
        ]
        return seen
    finally:
        executor.lease_release(lease)


def test_a_secrets_encodings_on_the_page_are_redacted_and_answer_the_same_for_two_secrets(
    screen: Executor, site: HostileSite
) -> None:
    first = encoded_answers(screen, site, FIRST)
    second = encoded_answers(screen, site, SECOND)
    for key in first:
        assert first[key] == second[key], key
    for secret, seen in ((FIRST, first), (SECOND, second)):
        for form in encodings(secret):
            assert form not in str(seen), form
    assert first["guesses"] == [("error", taint.ARGUMENTS_REASON)] * 3
    assert first["out"][0] == "ok" and first["out"][1].count(taint.REDACTED) == 6, first["out"]


def test_every_form_is_bounded_and_matches_at_every_alignment() -> None:
    forms = taint.encoded_forms(FIRST)
    assert len(forms) <= 16
    for prefix in ("", "a", "ab", "user:", "abcd"):
        for suffix in ("", "z", "zz"):
            encoded = base64.b64encode((prefix + FIRST + suffix).encode()).decode()
            assert any(form in encoded for form in forms if len(form) >= taint.MIN_ENCODED_LENGTH), (prefix, suffix)
            assert taint.REDACTED in taint.redact(encoded, taint.forms_of([FIRST]))


def person_typed_answers(screen: Executor, site: HostileSite, secret: str) -> dict[str, Any]:
    """A person types ``secret`` on the screen into the echoing field of the login page (a
    takeover), then the agent reads the page."""
    executor = client()
    lease = executor.lease_acquire()
    executor.navigate(lease, site.origin + "/login")
    executor.lease_release(lease)

    async def person_types() -> None:
        grant, _ = await screen.control.takeover()
        await screen.page.focus("#echoed")
        for key in secret:
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "key", "key": key, "phase": "down"}})
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "key", "key": key, "phase": "up"}})
        await screen.page.focus("#u")
        screen.control.grant_release(grant.id)

    on_executor(screen, person_types)
    lease = executor.lease_acquire()
    try:
        observed = executor.observe(100_000)
        seen: dict[str, Any] = {
            "echo": outcome(lambda: executor.extract_text(lease, "#echo")),
            "observe": {key: observed[key] for key in ("url", "title", "text", "tabs")},
            "guess": outcome(lambda: executor.navigate(lease, f"{site.origin}/blank/{secret}"))[:2],
        }
        # The page is gone (the field with it): the value stays known to the browser context.
        executor.navigate(lease, f"{site.origin}/blank")
        seen["after"] = outcome(lambda: executor.navigate(lease, f"{site.origin}/blank?{secret}"))[:2]
        return seen
    finally:
        executor.lease_release(lease)


def test_what_a_person_typed_is_redacted_and_answers_the_same_for_two_values(
    screen: Executor, site: HostileSite
) -> None:
    first = person_typed_answers(screen, site, "zq7-Wx9k")
    second = person_typed_answers(screen, site, "mp4-Yt2r")
    for key in first:
        assert first[key] == second[key], key
    assert first["echo"] == ("ok", "Signing in as [redacted]"), first["echo"]
    assert first["guess"] == ("error", taint.ARGUMENTS_REASON) and first["after"] == first["guess"]
    # The prefixes typed key by key were not kept: only each field's latest value.
    for short in ("zq7", "zq7-", "mp4-Y"):
        assert taint.redact(f"x {short} y") == f"x {short} y"
