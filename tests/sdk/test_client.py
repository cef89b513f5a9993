"""The Python SDK's RamClient against a live server: runs, descriptors, refusals,
and the descriptor check refusing every malformed variant a server could send."""

from __future__ import annotations

import ast
import asyncio
import copy
import hashlib
import inspect as inspect_
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ram_sdk.visual
from ram_sdk import (
    ENDPOINTS,
    AsyncRamClient,
    AsyncRunHandle,
    InvalidDescriptor,
    RamApiError,
    RamClient,
    RunHandle,
    UnsafeOrigin,
    checked_origin,
)

import ramsite.urls  # noqa: F401  (every router is registered)
from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from core.api import openapi_document
from runs.models import CredentialRequest, Run, RunStep
from runs.services import run_create
from tests.runs.test_recordings import _stored_recording
from tests.support.files_site import REPORT, serve_files_site
from tests.support.live import serve_asgi
from tests.support.screen import db, reset_executor
from tests.support.tiers import live


@pytest.fixture
@live
def ram(live_origin: str, runner_key: str) -> Iterator[RamClient]:
    with RamClient(live_origin, credential=lambda: runner_key) as client:
        yield client


def test_sdk_reads_continues_and_cancels_runs(
    ram: RamClient, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    paused = make_paused_run(account, computer, "continue")
    doomed = make_paused_run(account, computer, "takeover")

    page = ram.runs_list(kind="continue")
    assert page["count"] == 1 and page["runs"][0]["id"] == str(paused.id)
    assert ram.runs_list(limit=1)["next_offset"] == 1
    run = ram.run_get(paused.id)
    assert run["required_action"]["budget"] == {"model_calls": 3, "max_model_calls": 3, "remaining_model_calls": 0}

    first = ram.run_continue(paused.id, idempotency_key="sdk-continue-1")
    assert first["continued_from"] == str(paused.id)
    assert ram.run_continue(paused.id, idempotency_key="sdk-continue-1") == first
    with pytest.raises(RamApiError) as refused:
        ram.run_continue(paused.id, idempotency_key="sdk-continue-2")
    assert refused.value.status == 409 and refused.value.body["continued_run_id"] == first["run"]["id"]
    assert "required_action" not in ram.run_get(paused.id)

    assert ram.run_cancel(doomed.id)["status"] == "cancelled"
    assert Run.objects.get(pk=doomed.id).status == Run.Status.CANCELLED


def test_sdk_intervention_descriptor_is_checked_and_returned(
    ram: RamClient, live_origin: str, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    for kind in ("takeover", "credential", "connection"):
        run = make_paused_run(account, computer, kind)
        intervention = ram.intervention_descriptor(str(run.id))
        assert intervention["run_id"] == str(run.id)
        assert intervention["human_action"] == {"url": f"{live_origin}/tasks/{run.id}/intervention", "requires_login": True}
        assert intervention["progress"] and intervention["user_action"] and intervention["next_step"]
    # A saved credential is still presented (state credential_saved) and still passes the check.
    saved = make_paused_run(account, computer, "credential")
    CredentialRequest.objects.filter(run=saved).update(state=CredentialRequest.State.CREDENTIAL_SAVED)
    assert ram.intervention_descriptor(saved.id)["state"] == "credential_saved"


def test_sdk_reports_refusals_with_status_and_message(
    live_origin: str,
    ram: RamClient,
    account: Account,
    observer_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
) -> None:
    credits_run = make_paused_run(account, computer, "credits")
    with pytest.raises(RamApiError) as no_descriptor:
        ram.intervention_descriptor(credits_run.id)
    assert no_descriptor.value.status == 409
    with pytest.raises(RamApiError) as missing:
        ram.run_get(uuid.uuid4())
    assert (missing.value.status, missing.value.message) == (404, "No such run.")

    with RamClient(live_origin, credential=lambda: observer_key) as observer:
        assert observer.run_get(credits_run.id)["id"] == str(credits_run.id)
        with pytest.raises(RamApiError) as forbidden:
            observer.intervention_descriptor(credits_run.id)
        assert forbidden.value.status == 403
        assert observer_key not in str(forbidden.value) and observer_key not in repr(observer)

    bad_key = "ram_rk_000000000000_" + "A" * 43
    with RamClient(live_origin, credential=lambda: bad_key) as stranger, pytest.raises(RamApiError) as unauthorised:
        stranger.runs_list()
    assert unauthorised.value.status == 401 and bad_key not in str(unauthorised.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://example.com",
        "http://10.0.0.8:8000",
        "ftp://127.0.0.1",
        "https://user:secret@ram.example",
        "https://ram.example/api",
        "https://ram.example/?next=/",
        "https://ram.example/#x",
        "ram.example",
    ],
)
def test_origin_rule_refuses_anything_but_https_or_loopback(base_url: str) -> None:
    with pytest.raises(UnsafeOrigin):
        checked_origin(base_url)
    with pytest.raises(UnsafeOrigin):
        RamClient(base_url, credential=lambda: "unused")


@pytest.mark.parametrize(
    ("base_url", "origin"),
    [
        ("https://ram.example", "https://ram.example"),
        ("https://RAM.example:443/", "https://ram.example"),
        ("https://ram.example:8443", "https://ram.example:8443"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://localhost/", "http://localhost"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_origin_rule_accepts_https_and_loopback(base_url: str, origin: str) -> None:
    assert checked_origin(base_url) == origin


# --- A hostile server: every malformed descriptor variant is refused -------------------


class HostileServer:
    """Answers the descriptor path with whatever the test sets: status, headers and body."""

    def __init__(self) -> None:
        self.status = 200
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: Any = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        await send(
            {
                "type": "http.response.start",
                "status": self.status,
                "headers": [(b"content-type", b"application/json"), *self.headers],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(self.body).encode()})


RUN_ID = "11111111-1111-4111-8111-111111111111"


def _valid(origin: str) -> dict[str, Any]:
    return {
        "intervention": {
            "version": 1,
            "run_id": RUN_ID,
            "computer_id": "computer-1",
            "kind": "credential",
            "state": "pending",
            "reason": "authentication",
            "progress": "The task paused before the login.",
            "user_action": "Open the protected form and save the credential.",
            "next_step": "Check the dependency and ask for an explicit continuation.",
            "request_id": "22222222-2222-4222-8222-222222222222",
            "expires_at": "2026-10-11T23:00:00.000Z",
            "human_action": {"url": f"{origin}/tasks/{RUN_ID}/intervention", "requires_login": True},
        }
    }


def _variants(origin: str, port: int) -> dict[str, Callable[[dict[str, Any]], None]]:
    def set_url(url: str) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["intervention"]["human_action"].__setitem__("url", url)

    def set_field(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["intervention"].__setitem__(name, value)

    def drop_field(name: str) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["intervention"].pop(name)

    path = f"/tasks/{RUN_ID}/intervention"
    return {
        "another host": set_url(f"http://127.0.0.2:{port}{path}"),
        "another host name": set_url(f"http://localhost:{port}{path}"),
        "another scheme": set_url(f"https://127.0.0.1:{port}{path}"),
        "another port": set_url(f"http://127.0.0.1:{port + 1}{path}"),
        "protocol-relative": set_url(f"//evil.example{path}"),
        "javascript": set_url("javascript:alert(1)"),
        "credentials in url": set_url(f"http://user:pw@127.0.0.1:{port}{path}"),
        "query": set_url(f"{origin}{path}?invite=abc"),
        "empty query": set_url(f"{origin}{path}?"),
        "fragment": set_url(f"{origin}{path}#invite=abc"),
        "empty fragment": set_url(f"{origin}{path}#"),
        "open path": set_url(f"{origin}{path}/open"),
        "trailing slash": set_url(f"{origin}{path}/"),
        "another run's path": set_url(f"{origin}/tasks/33333333-3333-4333-8333-333333333333/intervention"),
        "dot segments": set_url(f"{origin}/tasks/{RUN_ID}/x/../intervention"),
        "viewer path": set_url(f"{origin}/view?computer_id=computer-1"),
        "url not a string": set_url(42),  # type: ignore[arg-type]
        "another run_id": set_field("run_id", "33333333-3333-4333-8333-333333333333"),
        "requires_login false": lambda d: d["intervention"]["human_action"].__setitem__("requires_login", False),
        "requires_login string": lambda d: d["intervention"]["human_action"].__setitem__("requires_login", "true"),
        "requires_login one": lambda d: d["intervention"]["human_action"].__setitem__("requires_login", 1),
        "requires_login missing": lambda d: d["intervention"]["human_action"].pop("requires_login"),
        "human_action extra field": lambda d: d["intervention"]["human_action"].__setitem__("invite", "x"),
        "human_action missing": drop_field("human_action"),
        "descriptor extra field": set_field("invite_url", f"{origin}/vault#invite=abc"),
        "envelope extra field": lambda d: d.__setitem__("invite", "abc"),
        "no envelope": lambda d: d.update(d.pop("intervention")),
        "version string": set_field("version", "1"),
        "version true": set_field("version", True),
        "unknown kind": set_field("kind", "vault_invite"),
        "unknown state": set_field("state", "opened"),
        "unknown reason": set_field("reason", "because"),
        "bad computer_id": set_field("computer_id", "-pc"),
        "empty text": set_field("progress", "   "),
        "link in text": set_field("user_action", f"Open {origin}{path} now"),
        "bearer in text": set_field("next_step", "Use Bearer abc"),
        "text too long": set_field("progress", "a" * 501),
        "credential without expires_at": drop_field("expires_at"),
        "credential with naive expires_at": set_field("expires_at", "2026-10-11T23:00:00"),
        "credential without request_id": drop_field("request_id"),
    }


@pytest.fixture
@live
def hostile() -> Iterator[tuple[HostileServer, str]]:
    server = HostileServer()
    with serve_asgi(app=server) as origin:
        yield server, origin


def test_descriptor_check_refuses_each_malformed_variant(hostile: tuple[HostileServer, str]) -> None:
    server, origin = hostile
    port = int(origin.rsplit(":", 1)[1])
    client = RamClient(origin, credential=lambda: "ram_rk_0_unused")
    server.body = _valid(origin)
    assert client.intervention_descriptor(RUN_ID)["request_id"] == "22222222-2222-4222-8222-222222222222"
    # The contract says human_action.url is absolute: a relative locator is refused.
    relative = _valid(origin)
    relative["intervention"]["human_action"]["url"] = f"/tasks/{RUN_ID}/intervention"
    server.body = relative
    with pytest.raises(InvalidDescriptor):
        client.intervention_descriptor(RUN_ID)

    for name, mutate in _variants(origin, port).items():
        body = copy.deepcopy(_valid(origin))
        mutate(body)
        server.body = body
        with pytest.raises(InvalidDescriptor):
            client.intervention_descriptor(RUN_ID)
            pytest.fail(f"accepted the variant: {name}")


def test_descriptor_check_refuses_per_kind_rules(hostile: tuple[HostileServer, str]) -> None:
    server, origin = hostile
    client = RamClient(origin, credential=lambda: "ram_rk_0_unused")

    human = _valid(origin)
    human["intervention"].update(kind="human_control", reason="captcha")
    del human["intervention"]["request_id"], human["intervention"]["expires_at"]
    server.body = human
    assert client.intervention_descriptor(RUN_ID)["kind"] == "human_control"
    for change in ({"state": "credential_saved"}, {"request_id": RUN_ID}, {"expires_at": "2026-10-11T23:00:00Z"}):
        server.body = copy.deepcopy(human)
        server.body["intervention"].update(change)
        with pytest.raises(InvalidDescriptor):
            client.intervention_descriptor(RUN_ID)

    google = copy.deepcopy(human)
    google["intervention"].update(kind="google_connection", reason="authorization_required", request_id=RUN_ID)
    server.body = google
    assert client.intervention_descriptor(RUN_ID)["kind"] == "google_connection"
    server.body["intervention"]["request_id"] = "22222222-2222-4222-8222-222222222222"
    with pytest.raises(InvalidDescriptor):
        client.intervention_descriptor(RUN_ID)


def test_descriptor_refusals_and_redirects_are_errors_not_descriptors(hostile: tuple[HostileServer, str]) -> None:
    server, origin = hostile
    client = RamClient(origin, credential=lambda: "ram_rk_0_unused")
    server.status, server.body = 409, {"error": "The run is not waiting for a person."}
    with pytest.raises(RamApiError) as conflict:
        client.intervention_descriptor(RUN_ID)
    assert (conflict.value.status, conflict.value.message) == (409, "The run is not waiting for a person.")

    server.status, server.body = 302, _valid(origin)
    server.headers = [(b"location", f"{origin}/elsewhere".encode())]
    with pytest.raises(RamApiError) as redirect:
        client.intervention_descriptor(RUN_ID)
    assert redirect.value.status == 302


def test_sdk_creates_runs_and_reads_computers_viewer_and_legacy_intervention(
    ram: RamClient, live_origin: str, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    assert [c["id"] for c in ram.computers_list()["computers"]] == [computer.id]
    assert ram.computer_get(computer.id) == ram.computers_list()["computers"][0]
    with pytest.raises(RamApiError) as unknown:
        ram.computer_get("not-" + computer.id)
    assert unknown.value.status == 404
    created = ram.run_create(
        task={"goal": "Read the page title", "steps": [{"tool": "extract_text", "arguments": {"selector": "title"}}]},
        computer_id=computer.id,
        max_model_calls=4,
    )
    # The computer is free: the queue starts the run before the answer is written.
    assert (created["status"], created["queue_position"], created["max_model_calls"]) == ("running", None, 4)
    assert Run.objects.get(pk=created["id"]).account_id == account.id
    with pytest.raises(RamApiError) as invalid:
        ram.run_create(task={"goal": ""}, computer_id=computer.id)
    assert invalid.value.status == 400

    viewer = ram.run_viewer(created["id"])
    assert viewer["url"] == f"{live_origin}/view?computer_id={computer.id}" and viewer["requires_login"] is True

    paused = make_paused_run(account, computer, "credential")
    legacy = ram.intervention(paused.id)
    assert legacy["intervention"]["run_id"] == str(paused.id)


@pytest.fixture
def paused_pair(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> tuple[str, str]:
    return str(make_paused_run(account, computer, "credential").id), str(make_paused_run(account, computer, "takeover").id)


async def test_async_client_reads_a_descriptor_and_continues_with_a_coroutine_credential(
    live_origin: str, runner_key: str, paused_pair: tuple[str, str]
) -> None:
    credential_run, takeover_run = paused_pair

    async def credential() -> str:
        return runner_key

    async with AsyncRamClient(live_origin, credential=credential) as ram:
        assert (await ram.runs_list(status="waiting_for_input"))["count"] == 2
        intervention = await ram.intervention_descriptor(credential_run)
        assert intervention["kind"] == "credential" and intervention["run_id"] == credential_run
        first = await ram.run_continue(takeover_run, idempotency_key="async-continue-1")
        assert await ram.run_continue(takeover_run, idempotency_key="async-continue-1") == first
        assert (await ram.run_get(takeover_run))["continued_run_id"] == first["run"]["id"]
        with pytest.raises(RamApiError) as refused:
            await ram.intervention_descriptor(takeover_run)
        assert refused.value.status == 409
        assert runner_key not in repr(ram)


def test_both_clients_share_one_endpoint_table_and_one_body_per_method() -> None:
    for name in ENDPOINTS:
        sync_method = getattr(RamClient, name)
        assert sync_method is getattr(AsyncRamClient, name), f"{name} is written twice"
        assert f'"{name}"' in inspect_.getsource(sync_method), f"{name} does not read its row"


@pytest.mark.django_db
def test_the_sdks_endpoint_table_matches_the_servers_api() -> None:
    paths = openapi_document()["paths"]
    for name, endpoint in ENDPOINTS.items():
        assert endpoint.path in paths, name
        assert endpoint.method.lower() in paths[endpoint.path], name


def test_the_screen_module_does_not_import_the_rest_client() -> None:
    tree = ast.parse(Path(ram_sdk.visual.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "ram_sdk.client" not in imported and "ram_sdk" not in imported


def test_sdk_reads_steps_events_and_masked_screenshots(screen: Any, live_origin: str, runner_key: str, account: Account) -> None:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    reset_executor(screen, "<title>Form</title><body><h1>Sign in</h1><input id=pw type=password></body>")
    with RamClient(live_origin, credential=lambda: runner_key) as ram:
        run = ram.run_create(task={"goal": "sign in"}, computer_id="pc-1", agent={"type": "external"})
        typed = ram.run_act(run["id"], "type", {"selector": "#pw", "text": "Typed-Secret-9z"}, idempotency_key="sdk-type-01")
        shot = ram.run_act(run["id"], "screenshot", idempotency_key="sdk-shot-001")
        steps = ram.run_steps(run["id"])
        assert [s["state"] for s in steps["steps"]] == ["succeeded", "succeeded"] and steps["next_after"] is None
        assert steps["steps"][0]["arguments"] == {"selector": "#pw", "characters": 15}
        assert steps["steps"][1]["artifact_ids"] == [shot["result"]["artifact_id"]]
        assert ram.run_steps(run["id"], after=0, limit=1)["steps"][0]["tool"] == "screenshot"
        events = ram.run_events(run["id"])["events"]
        assert events[0]["kind"] == "run_created"
        assert ram.run_events(run["id"], after=events[-1]["id"]) == {"events": [], "next_after": None}
        image = ram.artifact_get(typed["result"]["artifact_id"])
        assert isinstance(image, bytes) and image.startswith(b"\x89PNG\r\n")
        assert ram.run_observe(run["id"])["screenshot_artifact_id"] == shot["result"]["artifact_id"]
        with pytest.raises(RamApiError) as missing:
            ram.artifact_get(uuid.uuid4())
        assert missing.value.status == 404 and missing.value.message == "No such artifact."
        assert "Typed-Secret-9z" not in json.dumps([steps, events])


def test_sdk_uploads_a_file_for_the_upload_tool_and_fetches_a_download(
    screen: Any, live_origin: str, runner_key: str, account: Account, allow_egress: Any
) -> None:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    pdf = b"%PDF-1.4\n%%EOF\n"
    with serve_files_site() as site, RamClient(live_origin, credential=lambda: runner_key) as ram:
        allow_egress(site.origin)
        uploaded = ram.artifact_upload(pdf, filename="form.pdf", content_type="application/pdf")
        assert (uploaded["kind"], uploaded["size"], uploaded["sha256"]) == ("upload", len(pdf), hashlib.sha256(pdf).hexdigest())
        assert ram.artifact_get(uploaded["id"]) == pdf
        run = ram.run_create(task={"goal": "files"}, computer_id="pc-1", agent={"type": "external"})
        ram.run_act(run["id"], "navigate", {"url": f"{site.origin}/upload"}, idempotency_key="sdk-nav-0001")
        set_file = ram.run_act(
            run["id"], "upload", {"selector": "#doc", "artifact_id": uploaded["id"]}, idempotency_key="sdk-upload-1"
        )
        assert set_file["result"]["isError"] is False, set_file
        ram.run_act(run["id"], "click", {"selector": "#send"}, idempotency_key="sdk-send-001")
        ram.run_act(run["id"], "wait_for", {"selector": "#received:has-text('Received')"}, idempotency_key="sdk-wait-001")
        assert site.received == [("form.pdf", "application/pdf", pdf)]
        ram.run_act(run["id"], "navigate", {"url": f"{site.origin}/files"}, idempotency_key="sdk-nav-0002")
        clicked = ram.run_act(run["id"], "click", {"selector": "#report"}, idempotency_key="sdk-click-01")
        [download] = clicked["result"]["downloads"]
        assert ram.artifact_get(download["artifact_id"]) == REPORT
        with pytest.raises(RamApiError) as refused:
            ram.artifact_upload(b"MZ", filename="tool.exe", content_type="application/x-msdownload")
        assert refused.value.status == 415 and "content type" in refused.value.message
        with pytest.raises(ValueError):
            ram.artifact_upload(pdf, filename="../form.pdf", content_type="application/pdf")

    async def upload_async() -> Any:
        async with AsyncRamClient(live_origin, credential=lambda: runner_key) as client:
            return await client.artifact_upload(b"a,b\n1,2\n", filename="table.csv", content_type="text/csv")

    assert asyncio.run(upload_async())["content_type"] == "text/csv"


SLOW_PAGE = (
    "<title>Slow</title><body><h1>Waiting</h1><script>setTimeout(() => { const p = document.createElement('p');"
    " p.id = 'late'; p.textContent = 'Arrived'; document.body.append(p); }, 3000)</script></body>"
)


def _external_run(account: Account) -> str:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return "pc-1"


def test_a_run_handle_acts_and_observes_and_waits_out_a_long_action(
    screen: Any, live_origin: str, runner_key: str, account: Account, settings: Any
) -> None:
    computer_id = _external_run(account)
    settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS = 1
    with RamClient(live_origin, credential=lambda: runner_key) as ram:
        created = ram.run_create(task={"goal": "wait"}, computer_id=computer_id, agent={"type": "external"})
        run = ram.run(created["id"])
        assert isinstance(run, RunHandle) and run.id == created["id"] and run.get()["status"] == "running"
        reset_executor(screen, SLOW_PAGE)
        assert run.observe()["title"] == "Slow"
        # The server answers 202 after 1 s; with the same key, act reads that step until it settled.
        wait = {"selector": "#late", "timeout_ms": 15_000}
        first = ram.run_act(run.id, "wait_for", wait, idempotency_key="sdk-wait-0001")
        assert first["state"] == "started"
        waited = run.act("wait_for", wait, idempotency_key="sdk-wait-0001")
        assert waited["step_id"] == first["step_id"]
        assert waited["state"] == "succeeded" and waited["result"]["isError"] is False
        assert "Arrived" in run.observe()["text"]
        assert RunStep.objects.filter(run_id=run.id).count() == 1
        assert Run.objects.get(pk=run.id).model_calls == 1
        # The same key answers the same step; without a key each call is a new action.
        assert run.act("wait_for", wait, idempotency_key="sdk-wait-0001") == waited
        finished = run.act("finish", {"output": "arrived"})
        assert finished["run_status"] == "succeeded" and finished["step_id"] != waited["step_id"]
        assert Run.objects.get(pk=run.id).model_calls == 2
        with pytest.raises(RamApiError) as refused:
            run.act("finish", {"output": "again"})
        assert refused.value.status == 409
        with pytest.raises(ValueError):
            ram.run("not-a-run-id")


async def test_an_async_run_handle_acts_and_observes(
    screen: Any, live_origin: str, runner_key: str, account: Account, settings: Any
) -> None:
    computer_id = await db(lambda: _external_run(account))
    settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS = 1

    async def credential() -> str:
        return runner_key

    async with AsyncRamClient(live_origin, credential=credential) as ram:
        created = await ram.run_create(task={"goal": "wait"}, computer_id=computer_id, agent={"type": "external"})
        run = ram.run(created["id"])
        assert isinstance(run, AsyncRunHandle) and (await run.get())["status"] == "running"
        await asyncio.to_thread(reset_executor, screen, SLOW_PAGE)
        waited = await run.act("wait_for", {"selector": "#late", "timeout_ms": 15_000})
        assert waited["state"] == "succeeded" and waited["result"]["isError"] is False
        seen = await run.observe()
        assert seen["title"] == "Slow" and "Arrived" in seen["text"] and seen["run_status"] == "running"
        paused = await run.act("request_takeover", {"reason": "captcha"})
        assert paused["run_status"] == "waiting_for_input" and paused["required_action"]["kind"] == "takeover"
        assert (await run.get())["status"] == "waiting_for_input"
        assert await db(lambda: Run.objects.get(pk=run.id).model_calls) == 2


def test_sdk_creates_and_deletes_a_computer_named_within_the_account(
    ram: RamClient, account: Account, make_account: Callable[..., Account]
) -> None:
    created = ram.computer_create("sdk-made", name="From the SDK")
    assert (created["id"], created["name"], created["state"], created["available"]) == ("sdk-made", "From the SDK", "stopped", False)
    assert ram.computer_get("sdk-made") == created
    # The same id in another account is that account's own computer.
    Computer.objects.create(id="elsewhere", handle="sdk-other", account=make_account("Other"))
    assert ram.computer_create("sdk-other")["id"] == "sdk-other"
    with pytest.raises(RamApiError) as twice:
        ram.computer_create("sdk-made")
    assert twice.value.status == 409
    with pytest.raises(ValueError):
        ram.computer_create("-bad id")
    # An explicit start (202): the computer reads starting until an executor host runs it.
    started = ram.computer_start("sdk-made")
    assert (started["id"], started["state"], started["available"]) == ("sdk-made", "starting", False)
    assert ram.computer_get("sdk-made")["state"] == "starting"
    with pytest.raises(RamApiError) as absent:
        ram.computer_start("sdk-absent")
    assert absent.value.status == 404
    assert ram.computer_delete("sdk-made") is None
    for call in (lambda: ram.computer_get("sdk-made"), lambda: ram.computer_delete("sdk-made")):
        with pytest.raises(RamApiError) as gone:
            call()
        assert gone.value.status == 404
    assert [c["id"] for c in ram.computers_list()["computers"]] == ["sdk-other"]


def test_sdk_reads_a_runs_recording_and_its_timeline(live_origin: str, runner_key: str, account: Account, computer: Any) -> None:

    run = run_create(account=account, computer=computer, task={"goal": "x"}, max_model_calls=3)
    with RamClient(live_origin, credential=lambda: runner_key) as ram:
        with pytest.raises(RamApiError) as missing:
            ram.run_recording_timeline(run.id)
        assert missing.value.status == 404
        _stored_recording(run)
        timeline = ram.run_recording_timeline(run.id)
        assert [s["index"] for s in timeline["recording"]["segments"]] == [0]
        data = ram.run_recording(run.id, segment=0)
        assert isinstance(data, bytes) and data.startswith(b"\x1a\x45\xdf\xa3")
        assert len(data) == timeline["recording"]["segments"][0]["size"]
