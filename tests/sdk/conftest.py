"""A real executor (Chromium) for the SDK's screen tests, as in tests/visual."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accounts.models import Account
from executor.models import Computer
from executor.runtime import Executor
from tests.screen import register, reset_executor, start_executor


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    thread = start_executor("pc-1")
    yield thread.executor
    thread.stop()


@pytest.fixture
def screen(executor: Executor, account: Account, make_computer: Callable[..., Computer], live_origin: str) -> Any:
    """The live server and a ready computer ``pc-1`` of ``account`` driven by the module's executor."""
    make_computer(account, "pc-1")
    register(executor)
    reset_executor(executor)
    return executor
