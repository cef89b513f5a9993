"""Several web processes (RAM_WEB_WORKERS): how ``make run``'s web server is started, and the check
that several processes come with the Redis channel layer."""

from __future__ import annotations

from typing import Any

import pytest

from ramsite.checks import check_web_workers
from ramsite.management.commands import run_embedded


def started_with(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(run_embedded.uvicorn, "run", lambda app, **options: seen.update(app=app, **options))
    run_embedded.serve_web(host="127.0.0.1", port=8123)
    return seen


def test_one_web_process_by_default(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.RAM_WEB_WORKERS = 1
    seen = started_with(monkeypatch)
    assert seen["app"] == "ramsite.asgi:application" and "workers" not in seen
    assert seen["ws_ping_interval"] == 2.0 and seen["ws_max_size"] == 16_000  # the gateway's flags stay
    assert seen["ws"] == "visual.heartbeat:HeartbeatProtocol"  # the Pong awaited from when the Ping has left


def test_several_web_processes_share_the_port(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.RAM_WEB_WORKERS = 3
    assert started_with(monkeypatch)["workers"] == 3


def test_several_processes_without_redis_are_warned_about(settings: Any) -> None:
    settings.RAM_WEB_WORKERS, settings.REDIS_URL = 2, ""
    assert [m.id for m in check_web_workers()] == ["ram.W001"]
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert check_web_workers() == []
    settings.RAM_WEB_WORKERS, settings.REDIS_URL = 1, ""
    assert check_web_workers() == []
    settings.RAM_WEB_WORKERS = 0
    assert [m.id for m in check_web_workers()] == ["ram.E002"]
