"""Shared fixtures: small factories for accounts, keys, computers and paused runs,
and the test tiers.

Every test gets exactly one tier marker, from what it uses (or from its own mark):
``e2e`` drives a real browser through the human pages (``tests/e2e``); ``live``
starts or talks to a real server or process (uvicorn, Chromium, OpenBao, a Celery
worker, a loopback fake of a third party, a subprocess): it uses a fixture marked
``@live`` (``tests/support/tiers.py``), directly or through another; ``db`` uses the
database; ``unit`` uses nothing. ``make test-fast`` runs ``unit`` and ``db``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from accounts.models import Account, ApiKey, Membership
from accounts.services import api_key_create
from computers.models import Computer
from runs.contracts import ContinuePause, CreditsPause, TakeoverPause
from runs.models import Run
from runs.services import connection_request_pause, credential_request_pause, run_create, run_pause
from tests.support.live import free_port, serve_asgi
from tests.support.screen import register, reset_executor, start_executor
from tests.support.tiers import LIVE, fixture_tier, live
from tests.support.vault import openbao, vault  # noqa: F401 - fixtures: a real OpenBao for the session

TIERS = ("unit", "db", "live", "e2e")
DB_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"})


def uses_live_fixture(item: pytest.Item) -> bool:
    """Whether the test uses, directly or through other fixtures, one marked ``@live`` (tests/support/tiers.py)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(fixture_tier(d.func) == LIVE for defs in info.name2fixturedefs.values() for d in defs)


def tier_of(item: pytest.Item) -> str:
    own = [tier for tier in TIERS if item.get_closest_marker(tier) is not None]
    if len(own) > 1:
        raise pytest.UsageError(f"{item.nodeid} has more than one tier marker: {own}")
    if own:
        return own[0]
    fixtures = set(getattr(item, "fixturenames", ()))
    if "e2e" in item.path.parts:
        return "e2e"
    if uses_live_fixture(item):
        return "live"
    if fixtures & DB_FIXTURES or item.get_closest_marker("django_db") is not None:
        return "db"
    return "unit"


def pytest_configure(config: pytest.Config) -> None:
    # Password hashing is slow by design; tests hash many throwaway passwords (Django's advice for test runs).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests change keys and accounts behind the services' back (``.update(is_active=False)``) and
    # expect the next request to see it: the per-process key cache is on only in the tests of it
    # (tests/accounts/test_key_cache.py).
    settings.RAM_API_KEY_CACHE_SECONDS = 0
    # Live servers answer from pool threads that outlive each test; a connection they kept open
    # would hold the test database at its teardown. Production keeps them (DATABASE_CONN_MAX_AGE).
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))


# The suite's screens are driven by executors started in the test process (``register=False``):
# registered once, they send no heartbeats. Their computers stay ready for the length of a test
# (30 s, the threshold before heartbeats came from a thread of their own); subprocesses inherit it.
TEST_EXECUTOR_STALE_SECONDS = "30"
os.environ.setdefault("RAM_EXECUTOR_STALE_SECONDS", TEST_EXECUTOR_STALE_SECONDS)


@pytest.fixture(scope="session", autouse=True)
def executor_stale_seconds() -> Any:
    with override_settings(RAM_EXECUTOR_STALE_SECONDS=float(os.environ["RAM_EXECUTOR_STALE_SECONDS"])):
        yield


@pytest.fixture(scope="session", autouse=True)
def artifact_files(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Masked captures of the test run are stored in a directory of its own, not under var/."""
    location = tmp_path_factory.mktemp("artifacts")
    storages = {**settings.STORAGES, "artifacts": {**settings.STORAGES["artifacts"], "OPTIONS": {"location": str(location)}}}
    with override_settings(STORAGES=storages):
        yield location


@pytest.fixture
def make_account(db: None) -> Callable[..., Account]:
    def make(name: str = "Acme", balance: int = 0, active: bool = True) -> Account:
        return Account.objects.create(name=name, microcredit_balance=balance, is_active=active)

    return make


@pytest.fixture
def account(make_account: Callable[..., Account]) -> Account:
    return make_account()


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(account: Account, username: str = "person", password: str = "correct horse battery") -> User:
        user = User.objects.create_user(username=username, password=password)
        Membership.objects.create(user=user, account=account)
        return user

    return make


@pytest.fixture
def make_key(db: None) -> Callable[..., str]:
    def make(account: Account, kind: str = ApiKey.Kind.RUNNER) -> str:
        return api_key_create(account=account, kind=kind)[1]

    return make


@pytest.fixture
def runner_key(account: Account, make_key: Callable[..., str]) -> str:
    return make_key(account)


@pytest.fixture
def observer_key(account: Account, make_key: Callable[..., str]) -> str:
    return make_key(account, ApiKey.Kind.TASK_OBSERVER)


@pytest.fixture
def make_computer(db: None) -> Callable[..., Computer]:
    def make(account: Account, computer_id: str = "pc-1") -> Computer:
        return Computer.objects.create(id=computer_id, account=account, name=computer_id)

    return make


@pytest.fixture
def computer(account: Account, make_computer: Callable[..., Computer]) -> Computer:
    return make_computer(account)


@pytest.fixture
def make_paused_run(db: None) -> Callable[..., Run]:
    """A run paused at ``kind`` (takeover, credential, connection, continue, credits)."""

    def make(account: Account, computer: Computer | None, kind: str, **options: Any) -> Run:
        if computer is None:
            # A run whose computer assignment was removed (the API never creates one).
            run = Run.objects.create(account=account, computer=None, task={"goal": "test"}, max_model_calls=3)
        else:
            run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
        if kind == "takeover":
            run_pause(run=run, pause=TakeoverPause(kind="takeover", reason=options.get("reason", "captcha")))
        elif kind == "credential":
            credential_request_pause(
                run=run,
                portal_origin=options.get("portal_origin", "http://127.0.0.1:9"),
                label="Portal",
                ttl_seconds=options.get("ttl_seconds", 900),
            )
        elif kind == "connection":
            connection_request_pause(run=run, capabilities=["gmail.readonly"])
        elif kind == "continue":
            Run.objects.filter(pk=run.pk).update(model_calls=3)
            run.refresh_from_db()
            run_pause(run=run, pause=ContinuePause(kind="continue", reason="max_model_calls_reached"))
        elif kind == "credits":
            run_pause(
                run=run,
                pause=CreditsPause(
                    kind="credits",
                    reason="insufficient_credits",
                    required_microcredits=options.get("required", 12_000_000),
                    available_microcredits=account.microcredit_balance,
                ),
            )
        else:
            raise ValueError(kind)
        run.refresh_from_db()
        return run

    return make


class Api:
    """A test client speaking JSON with a bearer key."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def get(self, path: str, key: str | None = None, **params: Any) -> Any:
        return self.client.get(path, params, headers=self._headers(key))

    def post(self, path: str, body: Any = None, key: str | None = None, raw: bytes | None = None) -> Any:
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(path, data=data, content_type="application/json", headers=self._headers(key))


@pytest.fixture
def api(client: Client) -> Api:
    return Api(client)


@pytest.fixture
def allow_egress(settings: Any) -> Callable[[str], None]:
    """Open the computers' egress policy to one exact host:port (a test's local portal), never a range."""
    settings.RAM_BROWSER_EGRESS_ALLOW = []

    def allow(origin_or_host_port: str) -> None:
        host_port = urlsplit(origin_or_host_port).netloc if "://" in origin_or_host_port else origin_or_host_port
        settings.RAM_BROWSER_EGRESS_ALLOW = [*settings.RAM_BROWSER_EGRESS_ALLOW, host_port]

    return allow


@pytest.fixture
def origin(settings: Any) -> str:
    """The configured public origin (human_action URLs are built on it)."""
    return str(settings.RAM_PUBLIC_ORIGIN)


@pytest.fixture
@live
def live_origin(transactional_db: None, settings: Any) -> Any:
    """uvicorn on a loopback port serving the app; RAM_PUBLIC_ORIGIN is that origin."""
    # The origin must be known before the server starts: checks compare against it.
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    settings.RAM_PUBLIC_ORIGIN = origin
    settings.CSRF_TRUSTED_ORIGINS = [origin]
    with serve_asgi(port=port):
        yield origin


@pytest.fixture(scope="module")
@live
def executor() -> Any:
    """One real executor (one Chromium) per test module."""
    thread = start_executor("pc-1")
    yield thread.executor
    thread.stop()


@pytest.fixture
@live
def screen(executor: Any, account: Account, make_computer: Callable[..., Computer], live_origin: str) -> Any:
    """The live server and a ready computer ``pc-1`` of ``account`` driven by the module's executor."""
    make_computer(account, "pc-1")
    register(executor)
    reset_executor(executor)
    return executor
