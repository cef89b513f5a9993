"""A fixture's own tier mark: ``@live`` under ``@pytest.fixture`` says the fixture starts or reaches a
real server or process (uvicorn, Chromium, OpenBao, a Celery worker, a loopback fake of a third party,
a subprocess). A test that uses such a fixture, directly or through another fixture, is ``live``
(``tests/conftest.py``'s ``tier_of`` reads the mark): no hand list of fixture names to keep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LIVE = "live"


def live[F: Callable[..., Any]](fixture_function: F) -> F:
    """Mark a fixture's function live (put it below ``@pytest.fixture``)."""
    fixture_function.ram_tier = LIVE  # type: ignore[attr-defined]
    return fixture_function


def fixture_tier(function: Any) -> str | None:
    return getattr(function, "ram_tier", None)
