"""browser_login end to end (run loop, executor, Chromium, OpenBao) on a table-row login the
portal refuses in place: the agent's next steps — the accessible-name
oracle that recovered credentials, the page's text — answer the same for two stored credentials
of one length (on the code before taint tracking, the oracle matched for one and timed out for
the other)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from accounts.models import Account
from runs.models import Run, RunEvent
from tests.support.hostile_login import scripted_run, site_fixture, store_credentials  # noqa: F401 - the fixture
from tests.support.hostile_pages import HostileSite
from tests.support.vault import VaultServer

CREDENTIALS = {
    "first": ("alice-x1@example.com", "Tr0ub4dor&3x"),
    "second": ("bobby-y2@example.com", "Hunter2!Hunt"),
}
ORACLE = "internal:role=row[name=/Username: a/]"


@pytest.fixture
def stored(screen: Any, vault: VaultServer, account: Account, site: HostileSite, settings: Any) -> Account:
    return store_credentials(vault, account, settings, site.origin, CREDENTIALS)


def run_with(account: Account, site: HostileSite, credential_id: str) -> Run:
    steps = [
        {"tool": "navigate", "arguments": {"url": site.origin + "/login"}},
        {"tool": "browser_login", "arguments": {"credentialId": credential_id}},
        {"tool": "wait_for", "arguments": {"selector": ORACLE, "timeout_ms": 500}, "on_error": "continue"},
        {"tool": "wait_for", "arguments": {"selector": "#u", "timeout_ms": 2000}, "on_error": "continue"},
        {"tool": "extract_text", "arguments": {}, "on_error": "continue"},
        {"tool": "extract_text", "arguments": {"selector": "#echo"}, "on_error": "continue"},
    ]
    return scripted_run(account, "log in", steps, advances=12)


def after_login(run: Run) -> list[dict[str, Any]]:
    return [dict(step.result) for step in run.steps.filter(index__gte=2).exclude(tool="finish").order_by("index")]


def test_the_row_oracle_after_a_refused_table_login_answers_the_same_for_two_credentials(
    stored: Account, site: HostileSite
) -> None:
    first, second = run_with(stored, site, "first"), run_with(stored, site, "second")
    assert "refused" in first.steps.get(index=1).result["content"]
    seen_first, seen_second = after_login(first), after_login(second)
    assert len(seen_first) == 4
    assert seen_first == seen_second
    oracle = seen_first[0]
    # Refused with its own code while a filled field still holds a value; once browser_login has
    # emptied what it filled, allowed again — and then it matches nothing, for either credential.
    assert oracle["isError"] is True
    assert oracle.get("code") in ("browser.selector_value_dependent", None), oracle
    assert seen_first[1]["isError"] is False  # a value-blind selector works as always
    for username, password in CREDENTIALS.values():
        assert username not in str(seen_first + seen_second) and password not in str(seen_first + seen_second)


def test_a_value_dependent_selector_is_a_tool_error_of_its_own_in_a_run(stored: Account, site: HostileSite) -> None:
    steps = [
        {"tool": "navigate", "arguments": {"url": site.origin + "/held"}},
        {"tool": "wait_for", "arguments": {"selector": "internal:role=row[name=/Code: 1/]"}},
    ]
    run = scripted_run(stored, "read", steps, advances=5)
    refused = dict(run.steps.get(index=1).result)
    assert refused["code"] == "browser.selector_value_dependent" and refused["category"] == "invalid"
    assert run.status == "failed" and run.result["code"] == "browser.selector_value_dependent"


def run_steps(account: Account, steps: list[dict[str, Any]]) -> Run:
    return scripted_run(account, "log in", steps, advances=12)


def test_browser_logins_own_selectors_follow_the_value_blind_rule(stored: Account, site: HostileSite) -> None:
    """While the page holds a secret (here a filled one-time-code field), browser_login's own
    selectors are an oracle like any other (a row's name includes the code: the call answers at
    once or after its wait): refused before the vault is read, with the selector rule's code."""
    for selector in ("usernameSelector", "passwordSelector", "submitSelector"):
        run = run_steps(
            stored,
            [
                {"tool": "navigate", "arguments": {"url": site.origin + "/held"}},
                {
                    "tool": "browser_login",
                    "arguments": {"credentialId": "first", selector: "role=row[name=/Code: 1/]"},
                },
            ],
        )
        probe = dict(run.steps.get(index=1).result)
        assert probe["isError"] is True
        assert probe["code"] == "browser.selector_value_dependent" and probe["category"] == "invalid", probe


def test_a_guess_of_the_username_in_a_url_is_a_tool_error_of_its_own(stored: Account, site: HostileSite) -> None:
    username = CREDENTIALS["first"][0]
    run = run_steps(
        stored,
        [
            {"tool": "navigate", "arguments": {"url": site.origin + "/login"}},
            {"tool": "browser_login", "arguments": {"credentialId": "first"}},
            {"tool": "navigate", "arguments": {"url": f"{site.origin}/blank/bob@example.com/{username}/carol"}},
        ],
    )
    guess = dict(run.steps.get(index=2).result)
    assert guess["code"] == "browser.secret_in_arguments" and guess["category"] == "invalid", guess
    assert "[redacted]" not in str(guess) and username not in guess["content"]


def test_a_right_guess_in_a_steps_arguments_is_never_recorded(stored: Account, site: HostileSite) -> None:
    """A step is recorded (its summary, its ``step_started`` event) before the executor refuses a
    right guess as ``browser.secret_in_arguments``: the computer checks the summary first and a
    summary carrying a secret is withheld whole. Two credentials of one length, each guessed right,
    leave the same records; a wrong guess is recorded as ever."""
    seen = []
    for credential_id, (username, password) in CREDENTIALS.items():
        run = run_steps(
            stored,
            [
                {"tool": "navigate", "arguments": {"url": site.origin + "/login"}},
                {"tool": "browser_login", "arguments": {"credentialId": credential_id}},
                {"tool": "navigate", "arguments": {"url": f"{site.origin}/blank/{username}"}, "on_error": "continue"},
                {
                    "tool": "wait_for",
                    "arguments": {"selector": f'[title="{password}"]', "timeout_ms": 500},
                    "on_error": "continue",
                },
                {"tool": "navigate", "arguments": {"url": f"{site.origin}/blank/carol@example.com"}},
            ],
        )
        steps = {step.index: step for step in run.steps.all()}
        for index in (2, 3):
            assert steps[index].result["code"] == "browser.secret_in_arguments", steps[index].result
        started = [event.data for event in RunEvent.objects.filter(run=run, kind="step_started").order_by("id")]
        record = json.dumps([[step.summary for step in steps.values()], started])
        for secret in (username, password, username.replace("@", "%40")):
            assert secret not in record
        assert steps[4].summary["url"].endswith("/blank/carol@example.com")  # a wrong guess: as ever
        seen.append(
            (
                [steps[i].summary for i in (2, 3)],
                [{k: v for k, v in started[i].items() if k != "microcredits"} for i in (2, 3)],
            )
        )
    assert seen[0] == seen[1]
    assert seen[0][0] == [
        {"tool": "navigate", "withheld": True, "isError": True},
        {"tool": "wait_for", "withheld": True, "isError": True},
    ]
