"""POST /api/visual/sessions, GET /api/computers and GET /api/runs/{id}/viewer."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import DELEGATED, PASSWORD, SESSION_AUTH_METHOD, api_key_create
from computers.models import Computer
from visual.errors import TicketRefused, TooManyAccountSockets
from visual.models import VisualSession, VisualTicket
from visual.services import visual_session_create, visual_ticket_consume
from visual.tasks import sweep

BODY = {"computer_id": "pc-1", "mode": "observe", "transport": "jpeg-websocket-v1"}
INTENT = {"X-RAM-Intent": "visual-session"}


def ready(computer: Computer) -> Computer:
    computer.status = Computer.Status.READY
    computer.generation = uuid.uuid4()
    computer.executor_address = "127.0.0.1:9"
    computer.last_heartbeat_at = timezone.now()
    computer.save()
    return computer


@pytest.fixture
def ready_computer(computer: Computer) -> Computer:
    return ready(computer)


def post(client: Client, body: Any = BODY, key: str | None = None, headers: dict[str, str] | None = None) -> Any:
    all_headers = {**INTENT, **(headers or {})}
    if key:
        all_headers["Authorization"] = f"Bearer {key}"
    return client.post(
        "/api/visual/sessions", data=json.dumps(body), content_type="application/json", headers=all_headers
    )


def test_a_runner_key_creates_a_session_with_every_contract_field(client: Client, runner_key: str, ready_computer: Computer) -> None:
    response = post(client, key=runner_key)
    assert response.status_code == 201
    data = response.json()
    assert set(data) == {
        "version", "transport", "session_id", "ticket", "websocket_path", "subprotocol", "ticket_protocol_prefix",
        "connect_expires_in_seconds", "session_max_seconds", "max_fps", "viewport", "mode",
    }  # fmt: skip
    assert data["version"] == 1 and data["transport"] == "jpeg-websocket-v1"
    assert uuid.UUID(data["session_id"])
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", data["ticket"])
    assert data["websocket_path"] == "/api/visual/stream"
    assert data["subprotocol"] == "ram-jpeg-v1" and data["ticket_protocol_prefix"] == "ram-ticket."
    assert data["connect_expires_in_seconds"] == 60 and data["session_max_seconds"] == 900
    assert data["max_fps"] == 4 and data["viewport"] == {"width": 1280, "height": 720}
    assert data["mode"] == "observe"
    ticket = VisualTicket.objects.get()
    assert ticket.digest == hashlib.sha256(data["ticket"].encode()).hexdigest()
    assert data["ticket"] not in json.dumps(list(VisualTicket.objects.values()), default=str) + json.dumps(
        list(VisualSession.objects.values()), default=str
    )


def test_the_ticket_lives_exactly_the_60_seconds_the_answer_promises(
    client: Client, runner_key: str, ready_computer: Computer
) -> None:
    before = timezone.now()
    data = post(client, key=runner_key).json()
    after = timezone.now()
    expires_at = VisualTicket.objects.get().expires_at
    promised = timedelta(seconds=data["connect_expires_in_seconds"])
    assert promised == timedelta(seconds=60)
    assert before + promised <= expires_at <= after + promised


def test_the_sweep_ends_only_sessions_whose_ticket_expired_unused(
    client: Client, runner_key: str, ready_computer: Computer
) -> None:
    expired, fresh, used = (post(client, key=runner_key).json() for _ in range(3))
    visual_ticket_consume(raw_ticket=used["ticket"], origin=None)
    VisualTicket.objects.filter(session_id__in=[expired["session_id"], used["session_id"]]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert sweep() == 1
    sessions = {str(s.pk): s for s in VisualSession.objects.all()}
    assert sessions[expired["session_id"]].ended_at is not None
    assert sessions[expired["session_id"]].end_reason == "ticket_expired"
    assert sessions[fresh["session_id"]].ended_at is None  # its ticket is still valid
    assert sessions[used["session_id"]].ended_at is None  # connected: the gateway ends it
    assert VisualTicket.objects.get(session_id=expired["session_id"]).consumed_at is None
    assert sweep() == 0


def test_mode_control_and_max_fps_follow_the_request_and_settings(
    client: Client, runner_key: str, ready_computer: Computer, settings: Any
) -> None:
    settings.RAM_VISUAL_MAX_FPS = 10
    data = post(client, {**BODY, "mode": "control"}, key=runner_key).json()
    assert data["mode"] == "control" and data["max_fps"] == 10


@pytest.mark.parametrize(
    "body",
    [
        {},
        {**BODY, "extra": 1},
        {**BODY, "mode": "watch"},
        {**BODY, "transport": "webrtc"},
        {**BODY, "computer_id": ""},
        {**BODY, "computer_id": 5},
        {"computer_id": "pc-1", "mode": "observe"},
        [BODY],
    ],
)
def test_an_invalid_body_is_400(client: Client, runner_key: str, ready_computer: Computer, body: Any) -> None:
    response = post(client, body, key=runner_key)
    assert response.status_code == 400 and set(response.json()) == {"error"}
    assert not VisualSession.objects.exists()


def test_the_intent_header_is_required(client: Client, runner_key: str, ready_computer: Computer) -> None:
    response = client.post(
        "/api/visual/sessions", data=json.dumps(BODY), content_type="application/json",
        headers={"Authorization": f"Bearer {runner_key}"},
    )  # fmt: skip
    assert response.status_code == 400 and "X-RAM-Intent" in response.json()["error"]


def test_no_credential_is_401(client: Client, ready_computer: Computer) -> None:
    response = post(client)
    assert response.status_code == 401 and set(response.json()) == {"error"}


def test_a_revoked_or_unknown_key_is_401(client: Client, ready_computer: Computer) -> None:
    assert post(client, key="ram_rk_000000000000_" + "x" * 43).status_code == 401


def test_a_task_observer_key_is_403(client: Client, observer_key: str, ready_computer: Computer) -> None:
    response = post(client, key=observer_key)
    assert response.status_code == 403
    assert not VisualSession.objects.exists()


def _signed_in(client: Client, user: Any, method: str) -> Client:
    client.force_login(user)
    session = client.session
    session[SESSION_AUTH_METHOD] = method
    session.save()
    return client


def test_a_password_web_session_from_the_public_origin_creates_a_session(
    client: Client, account: Account, make_user: Callable[..., Any], ready_computer: Computer, settings: Any
) -> None:
    _signed_in(client, make_user(account), PASSWORD)
    response = post(client, headers={"Origin": settings.RAM_PUBLIC_ORIGIN})
    assert response.status_code == 201
    assert VisualSession.objects.get().user is not None


@pytest.mark.parametrize("origin", [None, "null", "https://evil.example", "http://127.0.0.1:8000/"])
def test_a_web_session_with_another_or_no_origin_is_403(
    client: Client, account: Account, make_user: Callable[..., Any], ready_computer: Computer, settings: Any, origin: str | None
) -> None:
    settings.RAM_PUBLIC_ORIGIN = "http://127.0.0.1:8000"
    _signed_in(client, make_user(account), PASSWORD)
    response = post(client, headers={"Origin": origin} if origin else {})
    assert response.status_code == 403


def test_a_delegated_web_session_is_403(
    client: Client, account: Account, make_user: Callable[..., Any], ready_computer: Computer, settings: Any
) -> None:
    _signed_in(client, make_user(account), DELEGATED)
    assert post(client, headers={"Origin": settings.RAM_PUBLIC_ORIGIN}).status_code == 403


def test_another_accounts_offline_or_unknown_computer_is_409(
    client: Client, runner_key: str, make_account: Callable[..., Account], make_computer: Callable[..., Computer], computer: Computer
) -> None:
    assert post(client, key=runner_key).status_code == 409  # offline
    ready(make_computer(make_account("Other"), "theirs"))
    assert post(client, {**BODY, "computer_id": "theirs"}, key=runner_key).status_code == 409
    assert post(client, {**BODY, "computer_id": "nope"}, key=runner_key).status_code == 409
    ready(computer)
    Computer.objects.filter(pk=computer.pk).update(last_heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    assert post(client, key=runner_key).status_code == 409  # silent executor


def test_pending_tickets_over_the_setting_are_429(
    client: Client, runner_key: str, ready_computer: Computer, settings: Any
) -> None:
    settings.RAM_VISUAL_MAX_PENDING_TICKETS = 2
    assert post(client, key=runner_key).status_code == 201
    assert post(client, key=runner_key).status_code == 201
    response = post(client, key=runner_key)
    assert response.status_code == 429 and set(response.json()) == {"error"}


@pytest.mark.parametrize("setting", ["RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT", "RAM_VISUAL_MAX_PENDING_TICKETS"])
def test_a_pending_ticket_limit_lowered_below_the_tickets_pending_refuses_more(
    client: Client, runner_key: str, ready_computer: Computer, settings: Any, setting: str
) -> None:
    """A limit lowered (at a restart) while more tickets are pending than it allows still refuses."""
    for _ in range(3):
        assert post(client, key=runner_key).status_code == 201
    setattr(settings, setting, 2)
    response = post(client, key=runner_key)
    assert response.status_code == 429 and set(response.json()) == {"error"}
    assert VisualTicket.objects.count() == 3


def test_a_ticket_binds_its_socket_to_the_key_that_created_it_or_to_no_key(
    account: Account, ready_computer: Computer, make_user: Callable[..., User]
) -> None:
    """Revoking the key ends the sockets it opened: the binding names it (and no key for a person)."""
    key, _ = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)
    _, raw = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", api_key=key)
    assert visual_ticket_consume(raw_ticket=raw, origin=None).api_key_id == str(key.id)
    person = make_user(account)
    _, raw = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", user=person)
    assert visual_ticket_consume(raw_ticket=raw, origin=settings.RAM_PUBLIC_ORIGIN).api_key_id is None


def test_a_ticket_refused_at_the_handshake_says_why(account: Account, ready_computer: Computer) -> None:
    """The refusal names the binding's problem, else that the computer is not ready."""
    key, _ = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)
    _, raw = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", api_key=key)
    Computer.objects.filter(pk=ready_computer.pk).update(is_active=False)
    with pytest.raises(TicketRefused) as refused:
        visual_ticket_consume(raw_ticket=raw, origin=None)
    assert refused.value.message == "This computer is no longer assigned to your account."
    ready(ready_computer)
    _, raw = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", api_key=key)
    Computer.objects.filter(pk=ready_computer.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    with pytest.raises(TicketRefused) as refused:
        visual_ticket_consume(raw_ticket=raw, origin=None)
    assert refused.value.message == "The computer is not ready; create a new session later."


def test_a_ticket_refused_for_the_socket_limit_is_used_up_and_its_session_ended(
    account: Account, ready_computer: Computer, settings: Any
) -> None:
    """The limit's refusal is raised after the ticket's use is committed: it cannot be tried again."""
    settings.RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT = 1
    key, _ = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)
    _, first = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", api_key=key)
    session, second = visual_session_create(account=account, computer_id=ready_computer.pk, mode="observe", api_key=key)
    visual_ticket_consume(raw_ticket=first, origin=None)
    with pytest.raises(TooManyAccountSockets):
        visual_ticket_consume(raw_ticket=second, origin=None)
    session.refresh_from_db()
    assert session.ended_at is not None and session.end_reason == "socket limit"
    assert VisualTicket.objects.get(session=session).consumed_at is not None
    with pytest.raises(TicketRefused):
        visual_ticket_consume(raw_ticket=second, origin=None)


LOCAL = {"backend": "local", "provider": "self_hosted", "options": {}, "ready_ms": None}
# A computer's settings before any is set: every browser default.
DEFAULTS = {"locale": None, "timezone": None, "user_agent": None, "viewport": None, "proxy": None}


def test_computers_lists_the_accounts_computers_with_availability(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer], make_account: Callable[..., Account]
) -> None:
    ready(make_computer(account, "pc-1"))
    make_computer(account, "pc-2")
    make_computer(make_account("Other"), "theirs")
    response = client.get("/api/computers", headers={"Authorization": f"Bearer {runner_key}"})
    assert response.status_code == 200
    assert response.json() == {
        "computers": [
            {"id": "pc-1", "name": "pc-1", "available": True, "status": "ready", "state": "ready", "state_reason": None, "browser": LOCAL, "settings": DEFAULTS},
            {"id": "pc-2", "name": "pc-2", "available": False, "status": "offline", "state": "stopped", "state_reason": None, "browser": LOCAL, "settings": DEFAULTS},
        ]
    }


def test_computers_refuses_a_task_observer_key(client: Client, observer_key: str) -> None:
    assert client.get("/api/computers", headers={"Authorization": f"Bearer {observer_key}"}).status_code == 403


def test_the_viewer_of_a_run_is_its_computers_view_link(
    client: Client, runner_key: str, account: Account, computer: Computer, make_paused_run: Callable[..., Any], settings: Any
) -> None:
    run = make_paused_run(account, computer, "takeover")
    response = client.get(f"/api/runs/{run.id}/viewer", headers={"Authorization": f"Bearer {runner_key}"})
    assert response.status_code == 200
    assert response.json() == {
        "available": True,
        "computer_id": "pc-1",
        "url": f"{settings.RAM_PUBLIC_ORIGIN}/view?computer_id=pc-1",
        "requires_login": True,
    }


def test_without_an_authorised_computer_the_viewer_is_unavailable(
    client: Client, runner_key: str, account: Account, computer: Computer, make_paused_run: Callable[..., Any]
) -> None:
    run = make_paused_run(account, None, "continue")
    response = client.get(f"/api/runs/{run.id}/viewer", headers={"Authorization": f"Bearer {runner_key}"})
    assert response.status_code == 409 and "url" not in response.json()
    bound = make_paused_run(account, computer, "takeover")
    Computer.objects.filter(pk=computer.pk).update(is_active=False)
    response = client.get(f"/api/runs/{bound.id}/viewer", headers={"Authorization": f"Bearer {runner_key}"})
    assert response.status_code == 409 and set(response.json()) == {"error"}


def test_a_profile_reset_ends_the_generation_under_a_new_profile_name(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer], make_account: Callable[..., Account]
) -> None:
    computer = ready(make_computer(account, "pc-1"))
    before = Computer.objects.get(pk="pc-1")
    auth = {"Authorization": f"Bearer {runner_key}"}
    response = client.post("/api/computers/pc-1/profile/reset", "", content_type="application/json", headers=auth)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "computer": {
            "id": "pc-1",
            "name": "pc-1",
            "available": False,
            "status": "offline",
            "state": "stopped",
            "state_reason": None,
            "browser": {"backend": "local", "provider": "self_hosted", "options": {}, "ready_ms": None},
            "settings": DEFAULTS,
        },
        "profile_reset": True,
    }
    after = Computer.objects.get(pk="pc-1")
    assert after.generation is None and after.profile_generation != before.profile_generation
    assert after.binding == before.binding and after.account_id == account.id  # runs keep their binding
    del computer
    # {} is accepted; any field, another account's computer or an observer key changes nothing.
    assert client.post("/api/computers/pc-1/profile/reset", "{}", content_type="application/json", headers=auth).status_code == 200
    settled = Computer.objects.get(pk="pc-1").profile_generation
    refused = client.post(
        "/api/computers/pc-1/profile/reset", json.dumps({"wipe": "all"}), content_type="application/json", headers=auth
    )
    assert refused.status_code == 400 and "error" in refused.json()
    make_computer(make_account("Other"), "theirs")
    theirs = Computer.objects.get(pk="theirs").profile_generation
    assert client.post("/api/computers/theirs/profile/reset", "", content_type="application/json", headers=auth).status_code == 404
    assert Computer.objects.get(pk="theirs").profile_generation == theirs
    assert Computer.objects.get(pk="pc-1").profile_generation == settled
    observer = api_key_create(account=account, kind="task_observer")[1]
    observed = client.post(
        "/api/computers/pc-1/profile/reset", "", content_type="application/json", headers={"Authorization": f"Bearer {observer}"}
    )
    assert observed.status_code == 403
    assert client.get("/api/computers/pc-1/profile/reset", headers=auth).status_code == 405
    assert Computer.objects.get(pk="pc-1").profile_generation == settled
