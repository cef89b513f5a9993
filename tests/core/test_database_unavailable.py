"""While PostgreSQL cannot be reached, every request answers at once: 503 with a retry hint, JSON for
programs (never an HTML error page), and everything answers again once it is back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from django.db import connections
from django.test import Client

from accounts.models import Account


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.fixture
def database_down(transactional_db: None) -> Iterator[None]:
    """The test's connection points at a loopback port where nothing listens (the machine's
    PostgreSQL, shared with others, is never stopped), then back."""
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=_closed_port())
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def test_every_request_answers_503_with_a_retry_hint_while_the_database_is_down(
    runner_key: str, database_down: None
) -> None:
    client = Client(raise_request_exception=False)
    started = time.monotonic()
    executor_token = "ram_ex_" + "x" * 43  # well-formed: it is looked up
    for path in ("/api/runs", "/api/computers", "/internal/executors/pc-1/heartbeat"):
        internal = path.startswith("/internal/")
        method = client.post if internal else client.get
        answer = method(path, HTTP_AUTHORIZATION="Bearer " + (executor_token if internal else runner_key))
        assert answer.status_code == 503, (path, answer.content[:200])
        assert answer["Content-Type"] == "application/json"
        assert answer["Retry-After"] == "5"
        body = answer.json()
        assert set(body) == {"error"} and "database is unavailable" in body["error"]
        assert runner_key not in answer.content.decode()
    page = client.post("/accounts/login/", {"username": "person", "password": "not-checked"})
    assert page.status_code == 503 and page["Retry-After"] == "5"
    assert page["Content-Type"].startswith("text/plain") and b"<" not in page.content
    assert time.monotonic() - started < 10  # answered at once, not after a hang


def test_requests_answer_again_once_the_database_is_back(transactional_db: None, runner_key: str) -> None:
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    client = Client(raise_request_exception=False)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=_closed_port())
    try:
        assert client.get("/api/runs", HTTP_AUTHORIZATION="Bearer " + runner_key).status_code == 503
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    answer = client.get("/api/runs", HTTP_AUTHORIZATION="Bearer " + runner_key)
    assert answer.status_code == 200 and "runs" in answer.json()
    assert Account.objects.count() == 1
