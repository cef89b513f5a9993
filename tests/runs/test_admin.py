"""The staff admin's run pages: the list names runs by goal with status, computer and creation
time in a fixed number of queries; a run's page lists its steps with the masked captures
taken after them, served to staff only and only as that run's own captures."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.models import Account
from computers.artifacts import artifact_store
from computers.models import Computer
from runs import services
from runs.models import Run, RunStep

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
JPEG = b"\xff\xd8\xff\xe0" + b"masked capture" * 20


@pytest.fixture
def staff_client(client: Client) -> Client:
    User.objects.create_superuser(username="staff", password=PASSWORD)
    assert client.post("/accounts/login/", {"username": "staff", "password": PASSWORD}).status_code in (302, 303)
    return client


def _run_with_steps(account: Account, computer: Computer, steps: int, goal: str = "Renew the permit") -> Run:
    run = services.run_create(account=account, computer=computer, max_model_calls=20, task={"goal": goal})
    for index in range(steps):
        RunStep.objects.create(
            run=run, index=index, tool="navigate", state=RunStep.State.SUCCEEDED,
            summary={"tool": "navigate", "url": f"https://example.com/{index}", "isError": False},
        )  # fmt: skip
        shot = artifact_store(computer_id=computer.id, kind="screenshot", data=JPEG, content_type="image/jpeg")
        services.run_event_append(run=run, kind="step_completed", data={"index": index, "isError": False, "artifact_id": str(shot)})
    return run


def _queries(client: Client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured), response.content.decode()


def test_run_list_shows_goal_status_computer_and_created_in_constant_queries(
    staff_client: Client, make_account: Callable[..., Account], make_computer: Callable[..., Computer]
) -> None:
    def add(n: int) -> None:
        for i in range(n):
            account = make_account(name=f"Account {Account.objects.count()}")
            computer = make_computer(account, f"pc-{Computer.objects.count()}")
            services.run_create(account=account, computer=computer, max_model_calls=3, task={"goal": f"Goal number {i}"})

    add(2)
    _queries(staff_client, "/admin/runs/run/")  # the first request of a session costs more
    few, page = _queries(staff_client, "/admin/runs/run/")
    add(8)
    many, page = _queries(staff_client, "/admin/runs/run/")
    assert few == many
    for text in ('column-goal_shown', 'column-status', 'column-computer', 'column-created_at'):
        assert text in page
    assert "Goal number 7" in page and "pc-9" in page


def test_run_page_lists_steps_with_their_captures_in_constant_queries(
    staff_client: Client, account: Account, computer: Computer
) -> None:
    short = _run_with_steps(account, computer, 1)
    long = _run_with_steps(account, computer, 6)
    _queries(staff_client, f"/admin/runs/run/{short.id}/change/")  # the first request of a session costs more
    few, _ = _queries(staff_client, f"/admin/runs/run/{short.id}/change/")
    many, page = _queries(staff_client, f"/admin/runs/run/{long.id}/change/")
    assert few == many
    assert page.count('alt="Masked capture after step') == 6
    assert "https://example.com/5" in page


def test_captures_are_served_to_staff_for_their_own_run_only(
    staff_client: Client, client: Client, account: Account, computer: Computer, make_user: Callable[..., User]
) -> None:
    run = _run_with_steps(account, computer, 1)
    other = _run_with_steps(account, computer, 1)
    shot = str(run.events.get(kind="step_completed").data["artifact_id"])
    download = artifact_store(computer_id=computer.id, kind="download", data=b"a file", content_type="application/pdf")
    services.run_event_append(run=run, kind="step_completed", data={"index": 9, "isError": False, "artifact_id": str(download)})

    served = staff_client.get(f"/admin/runs/run/{run.id}/captures/{shot}")
    assert served.status_code == 200 and served.content == JPEG and served["Content-Type"] == "image/jpeg"
    assert "no-store" in served["Cache-Control"]
    # Another run's address, a download (not a capture), nonsense: 404.
    for path in (f"{other.id}/captures/{shot}", f"{run.id}/captures/{download}", f"{run.id}/captures/x", f"x/captures/{shot}"):
        assert staff_client.get(f"/admin/runs/run/{path}").status_code == 404, path

    staff_client.post("/accounts/logout/")
    make_user(account, "ana", PASSWORD)
    assert client.post("/accounts/login/", {"username": "ana", "password": PASSWORD}).status_code in (302, 303)
    refused = client.get(f"/admin/runs/run/{run.id}/captures/{shot}")
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")
