"""Runs tests that need a real computer reuse the executor fixtures."""

from tests.executor.conftest import executor, screen  # noqa: F401 - fixtures
