"""The guide's examples run against a real executor, as the SDK's screen tests do."""

from tests.sdk.conftest import executor, screen  # noqa: F401 - fixtures
