"""Staff admin: computers with generation, executor status and last heartbeat; visual sessions read-only."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from computers.errors import ExecutorTokenInvalid
from computers.models import Computer, ExecutorHost
from computers.placement import computer_start, host_sync, host_token_issue
from computers.services import executor_authenticate, executor_token_issue
from visual.services import visual_session_create


@pytest.fixture
def staff_client(db: None, client: Client) -> Client:
    User.objects.create_superuser(username="staff", password="correct horse battery")
    response = client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"})
    assert response.status_code in (302, 303)
    return client


def test_staff_see_each_computers_generation_status_and_heartbeat(staff_client: Client, computer: Computer) -> None:
    client = staff_client
    generation = uuid.uuid4()
    Computer.objects.filter(pk=computer.pk).update(
        generation=generation, status="ready", executor_address="127.0.0.1:9", last_heartbeat_at=timezone.now()
    )
    page = client.get("/admin/computers/computer/").content.decode()
    assert str(generation) in page and "ready" in page.lower() and "pc-1" in page
    assert client.get(f"/admin/computers/computer/{computer.pk}/change/").status_code == 200


def test_visual_sessions_are_listed_without_their_ticket(staff_client: Client, account: Any, computer: Computer) -> None:
    client = staff_client
    Computer.objects.filter(pk=computer.pk).update(
        generation=uuid.uuid4(), status="ready", executor_address="127.0.0.1:9", last_heartbeat_at=timezone.now()
    )
    computer.refresh_from_db()
    session, ticket = visual_session_create(account=account, computer_id="pc-1", mode="observe")
    listing = client.get("/admin/visual/visualsession/")
    detail = client.get(f"/admin/visual/visualsession/{session.pk}/change/")
    assert listing.status_code == 200 and detail.status_code == 200
    assert str(session.pk) in listing.content.decode()
    assert ticket not in listing.content.decode() + detail.content.decode()
    assert client.get("/admin/visual/visualsession/add/").status_code == 403


def test_staff_reset_a_computers_browser_profile_from_the_list(staff_client: Client, computer: Computer) -> None:
    Computer.objects.filter(pk=computer.pk).update(
        generation=uuid.uuid4(), status="ready", executor_address="127.0.0.1:9", last_heartbeat_at=timezone.now()
    )
    before = Computer.objects.get(pk=computer.pk)
    response = staff_client.post(
        "/admin/computers/computer/", {"action": "reset_profile", "_selected_action": [computer.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "Reset the browser profile of 1 computer" in response.content.decode()
    after = Computer.objects.get(pk=computer.pk)
    assert after.generation is None and after.status == "offline"
    assert after.profile_generation != before.profile_generation and after.binding == before.binding


def test_staff_issue_an_executor_token_shown_once_and_stored_as_a_digest(
    staff_client: Client, computer: Computer
) -> None:
    old = executor_token_issue(computer_id=computer.pk)
    response = staff_client.post(
        "/admin/computers/computer/", {"action": "issue_executor_token", "_selected_action": [computer.pk]}
    )
    assert response.status_code == 200
    (token,) = re.findall(r'<code class="executor-token">(ram_ex_[A-Za-z0-9_-]{43})</code>', response.content.decode())
    stored = Computer.objects.get(pk=computer.pk).executor_token_digest
    assert stored == hashlib.sha256(token.encode()).hexdigest() and token not in stored
    # The previous token no longer authenticates; the new one does, for this computer only.
    with pytest.raises(ExecutorTokenInvalid):
        executor_authenticate(computer_id=computer.pk, raw_token=old)
    executor_authenticate(computer_id=computer.pk, raw_token=token)
    # The change page never shows it again.
    assert token not in staff_client.get(f"/admin/computers/computer/{computer.pk}/change/").content.decode()


def test_staff_see_executor_hosts_and_where_computers_run_never_a_host_token(
    staff_client: Client, computer: Computer, django_capture_on_commit_callbacks: Any
) -> None:
    token = host_token_issue(host_id="host-a")
    host_sync(host_id="host-a", capacity=3, running=[], exited=[], health={"load1": 0.5})
    with django_capture_on_commit_callbacks(execute=True):  # placed once the start commits
        computer_start(computer=computer)
    hosts = staff_client.get("/admin/computers/executorhost/").content.decode()
    assert "host-a" in hosts and token not in hosts
    page = staff_client.get("/admin/computers/executorhost/host-a/change/").content.decode()
    assert "load1" in page and token not in page

    assert ExecutorHost.objects.get(pk="host-a").token_digest not in page
    listing = staff_client.get("/admin/computers/computer/").content.decode()
    assert "host-a" in listing  # the computer is placed there
