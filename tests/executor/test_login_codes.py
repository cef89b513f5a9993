"""browser_login's "did not complete" codes: one table in the code, the same table in the docs,
every code unprocessable with a message that tells the agent what to do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from executor import login_codes
from executor.login_codes import LOGIN_CODES, code_table, not_completed

ROOT = Path(__file__).resolve().parents[2]


def test_the_security_guide_lists_exactly_the_codes_of_the_table() -> None:
    page = (ROOT / "docs" / "security.md").read_text()
    assert code_table() in page, "docs/security.md's login codes are stale: run make docs"
    documented = set(re.findall(r"^\| `(browser\.[a-z_]+)` \| `unprocessable` \|", page, re.MULTILINE))
    assert documented == set(LOGIN_CODES)


def test_the_spec_codes_and_each_cause_have_their_own_code() -> None:
    assert {"browser.captcha_pending", "browser.login_timeout"} <= set(LOGIN_CODES)
    for cause in ("origin_refused", "credential_not_found", "login_form_not_found", "vault_unavailable",
                  "provider_not_configured", "executor_unavailable"):
        assert f"browser.{cause}" in LOGIN_CODES
    names = {value for name, value in vars(login_codes).items() if name.isupper() and isinstance(value, str)}
    assert set(LOGIN_CODES) <= names


def test_every_code_the_login_can_answer_is_in_the_table() -> None:
    sources = [ROOT / "executor" / "login.py", ROOT / "executor" / "actions.py", ROOT / "runs" / "tools.py"]
    used = {code for path in sources for code in re.findall(r'"(browser\.[a-z_]+)"', path.read_text())}
    assert used <= set(LOGIN_CODES)


@pytest.mark.parametrize("code", list(LOGIN_CODES))
def test_a_not_completed_result_is_unprocessable_and_says_what_to_do(code: str) -> None:
    result = not_completed(code, "something happened.")
    assert result["isError"] is True and result["code"] == code
    assert result["category"] == "unprocessable", "never an availability category: nothing may re-submit the password"
    assert result["content"].startswith("The login did not complete: something happened.")
    assert "Nothing is proven about the credential." in result["content"]
    assert result["content"].endswith(LOGIN_CODES[code].advice)
    assert re.search(r"\b(call|navigate|take|wait|check)\b", LOGIN_CODES[code].advice, re.IGNORECASE)
