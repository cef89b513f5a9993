"""What happened, through the API: a run's steps, its events and its masked screenshots.

Against the real executor (Chromium) and the real run loop; the captures are
checked pixel by pixel for the blur of password fields and typed-into fields.
Browser tools of external runs run in a thread of their own, so these tests commit.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.files.storage import storages
from django.db.models.signals import post_save
from django.test import Client
from PIL import Image, ImageFilter, ImageStat

from accounts.models import Account
from accounts.services import account_top_up, api_key_create
from computers.models import Computer, DiagnosticArtifact
from runs import loop, tasks
from runs.contracts import CredentialPause
from runs.models import Run, RunEvent, RunStep
from runs.pauses import run_pause
from tests.conftest import Api
from tests.support.screen import on_executor, reset_executor

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Typed-Secret-9z"
NOTE = "Visible-Words-123"
FORM = """<title>Form</title><body style="margin:0;font-family:sans-serif">
<h1 style="font-size:48px;margin:20px">Sign in to the portal</h1>
<input id=note style="font-size:40px;width:700px;height:80px;margin:20px;display:block">
<input id=pw type=password style="font-size:40px;width:700px;height:80px;margin:20px;display:block">
</body>"""


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


@pytest.fixture
def make_run(api: Api, funded: Account, make_computer: Callable[..., Computer], runner_key: str) -> Callable[..., str]:
    def make(agent: str = "external", steps: list[dict[str, Any]] | None = None) -> str:
        if not Computer.objects.filter(pk="pc-1").exists():  # the screen fixture registers a live one
            make_computer(funded, "pc-1")
        body: dict[str, Any] = {"task": {"goal": "test", "steps": steps or []}, "computer_id": "pc-1"}
        body["agent"] = {"type": agent}
        created = api.post("/api/runs", body, key=runner_key)
        assert created.status_code == 201, created.content
        return str(created.json()["id"])

    return make


def act(api: Api, key: str, run_id: str, tool: str, idempotency_key: str, **arguments: Any) -> Any:
    answer = api.post(
        f"/api/runs/{run_id}/actions",
        {"tool": tool, "arguments": arguments, "idempotency_key": idempotency_key},
        key=key,
    )
    assert answer.status_code == 200, answer.content
    return answer.json()


def edges(image: Image.Image, box: tuple[int, int, int, int]) -> float:
    """Mean edge strength inside ``box`` (edges found on the whole image, so crops add none)."""
    return float(ImageStat.Stat(image.filter(ImageFilter.FIND_EDGES).crop(box)).mean[0])


def box_of(screen: Any, selector: str) -> tuple[int, int, int, int]:
    box = on_executor(screen, lambda: screen.page.locator(selector).bounding_box())
    return (int(box["x"]) + 4, int(box["y"]) + 4, int(box["x"] + box["width"]) - 4, int(box["y"] + box["height"]) - 4)


def png(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("L")


def artifact_png(api: Api, key: str, artifact_id: str) -> Image.Image:
    answer = api.get(f"/api/artifacts/{artifact_id}", key=key)
    assert answer.status_code == 200 and answer["Content-Type"] == "image/png"
    assert "no-store" in answer["Cache-Control"]
    return png(answer.content)


def test_typed_fields_and_password_fields_are_blurred_in_every_capture(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str]
) -> None:
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    note = act(api, runner_key, run_id, "type", "type-note-01", selector="#note", text=NOTE)
    secret = act(api, runner_key, run_id, "type", "type-pw-0001", selector="#pw", text=SECRET)
    shot = act(api, runner_key, run_id, "screenshot", "screenshot-01")
    ids = [note["result"]["artifact_id"], secret["result"]["artifact_id"], shot["result"]["artifact_id"]]
    assert all(ids) and len(set(ids)) == 3
    assert shot["result"]["content"].startswith(f"Screenshot stored as artifact {ids[2]}")
    sharp = png(on_executor(screen, lambda: screen.page.screenshot(type="png")))
    note_box, pw_box, heading = box_of(screen, "#note"), box_of(screen, "#pw"), box_of(screen, "h1")
    assert edges(sharp, note_box) > 2 and edges(sharp, pw_box) > 2  # both fields show their text unmasked
    first, second, last = (artifact_png(api, runner_key, artifact_id) for artifact_id in ids)
    # The field the step typed into is blurred; so is every password field, typed into or not.
    for stored in (first, second, last):
        assert edges(sharp, note_box) > 5 * max(edges(stored, note_box), 0.1)
        assert edges(sharp, pw_box) > 5 * max(edges(stored, pw_box), 0.1)
        # The rest of the page is not.
        assert edges(stored, heading) > 0.5 * edges(sharp, heading)
    # Secret-free: the steps and events record the typed text's length only.
    steps = api.get(f"/api/runs/{run_id}/steps", key=runner_key)
    events = api.get(f"/api/runs/{run_id}/events", key=runner_key)
    for text in (steps.content.decode(), events.content.decode(), str(list(RunStep.objects.values()))):
        assert SECRET not in text and NOTE not in text
    typed = steps.json()["steps"][1]
    assert typed["arguments"] == {"selector": "#pw", "characters": len(SECRET)}
    assert typed["artifact_ids"] == [ids[1]] and typed["state"] == "succeeded"


def test_steps_list_states_results_times_and_pages(
    screen: Any, live_origin: str, runner_key: str, observer_key: str, make_run: Callable[..., str], allow_egress: Any
) -> None:
    api = Api(Client())
    allow_egress(live_origin)
    run_id = make_run(
        agent="scripted",
        steps=[
            {"tool": "navigate", "arguments": {"url": f"{live_origin}/accounts/login/?next=/secret-token"}},
            {"tool": "wait_for", "arguments": {"selector": "#nothing-here", "timeout_ms": 200}, "on_error": "continue"},
            {"tool": "extract_text", "arguments": {"selector": "h1"}},
            {"tool": "finish", "arguments": {"output": "done"}},
        ],
    )
    while loop.run_step_advance(run_id=Run.objects.get(pk=run_id).pk):
        pass
    answer = api.get(f"/api/runs/{run_id}/steps", key=observer_key)  # task_observer keys read steps too
    assert answer.status_code == 200, answer.content
    steps = answer.json()["steps"]
    assert [s["tool"] for s in steps] == ["navigate", "wait_for", "extract_text", "finish"]
    assert [s["index"] for s in steps] == [0, 1, 2, 3]
    navigate, waited, extracted, finished = steps
    assert navigate["arguments"] == {"url": f"{live_origin}/accounts/login/"}  # never the query
    assert navigate["state"] == "succeeded" and navigate["result"]["isError"] is False
    assert len(navigate["artifact_ids"]) == 1
    assert waited["state"] == "failed" and waited["result"]["isError"] is True
    assert waited["artifact_ids"] == []  # waiting neither navigates nor types
    assert extracted["state"] == "succeeded" and extracted["result"]["content"]
    assert finished["state"] == "succeeded" and finished["arguments"] == {}
    for step in steps:
        assert step["started_at"] <= step["finished_at"]
        assert step["step_id"] == RunStep.objects.get(run_id=run_id, index=step["index"]).pk
    assert "secret-token" not in answer.content.decode()
    # Pages: after an index, at most limit, next_after while more may follow.
    first = api.get(f"/api/runs/{run_id}/steps", key=runner_key, limit="2").json()
    assert [s["index"] for s in first["steps"]] == [0, 1] and first["next_after"] == 1
    rest = api.get(f"/api/runs/{run_id}/steps", key=runner_key, after="1", limit="2").json()
    assert [s["index"] for s in rest["steps"]] == [2, 3] and rest["next_after"] == 3
    assert api.get(f"/api/runs/{run_id}/steps", key=runner_key, after="3").json() == {"steps": [], "next_after": None}
    for bad in ({"after": "-1"}, {"after": "x"}, {"limit": "0"}, {"limit": "101"}):
        refused = api.get(f"/api/runs/{run_id}/steps", key=runner_key, **bad)
        assert refused.status_code == 400 and "error" in refused.json()


def test_events_are_paged_with_an_after_cursor_and_scoped_to_the_account(
    api: Api, runner_key: str, observer_key: str, make_run: Callable[..., str]
) -> None:
    run_id = make_run()
    act(api, runner_key, run_id, "request_takeover", "takeover-001", reason="captcha")
    everything = api.get(f"/api/runs/{run_id}/events", key=observer_key).json()
    kinds = [e["kind"] for e in everything["events"]]
    assert kinds[:5] == ["run_created", "run_queued", "run_started", "step_started", "step_completed"]
    assert "run_paused" in kinds
    assert everything["next_after"] is None
    ids = [e["id"] for e in everything["events"]]
    assert ids == sorted(ids)
    page = api.get(f"/api/runs/{run_id}/events", key=runner_key, limit="2").json()
    assert [e["id"] for e in page["events"]] == ids[:2] and page["next_after"] == ids[1]
    newer = api.get(f"/api/runs/{run_id}/events", key=runner_key, after=str(ids[1])).json()
    assert [e["id"] for e in newer["events"]] == ids[2:]
    paused = next(e for e in everything["events"] if e["kind"] == "run_paused")
    assert paused["data"] == {"kind": "takeover", "reason": "captcha"}
    other = Account.objects.create(name="Other")
    _, other_key = api_key_create(account=other, kind="runner")
    for path in (f"/api/runs/{run_id}/events", f"/api/runs/{run_id}/steps"):
        assert api.get(path, key=other_key).status_code == 404
        assert api.get(path).status_code == 401
    assert api.get("/api/runs/not-a-uuid/events", key=runner_key).status_code == 404


def test_a_pause_stores_a_masked_capture_of_the_page(
    screen: Any, live_origin: str, runner_key: str, observer_key: str, make_run: Callable[..., str]
) -> None:
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    act(api, runner_key, run_id, "request_takeover", "takeover-001", reason="captcha")
    captured = RunEvent.objects.get(run_id=run_id, kind="screenshot_captured")
    artifact_id = captured.data["artifact_id"]
    assert captured.data == {"artifact_id": artifact_id, "trigger": "paused"}
    assert DiagnosticArtifact.objects.get(pk=artifact_id).kind == "screenshot"
    artifact_png(api, runner_key, artifact_id)
    # The observation names it (and takes none itself).
    seen = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert seen["screenshot_artifact_id"] == artifact_id
    # A task_observer key has no visual access; another account sees no such artifact.
    assert api.get(f"/api/artifacts/{artifact_id}", key=observer_key).status_code == 403
    other = Account.objects.create(name="Other")
    _, other_key = api_key_create(account=other, kind="runner")
    refused = api.get(f"/api/artifacts/{artifact_id}", key=other_key)
    assert refused.status_code == 404 and refused.json()["error"] == "No such artifact."
    assert api.get("/api/artifacts/not-a-uuid", key=runner_key).status_code == 404


@contextlib.contextmanager
def on_capture_stored(react: Callable[[DiagnosticArtifact], None]) -> Iterator[None]:
    """Call ``react`` when the executor stores a capture (in the server's thread that stores it,
    while the executor's answer to the capture is still on its way)."""

    def stored(sender: Any, instance: DiagnosticArtifact, created: bool, **kwargs: Any) -> None:
        if created and instance.kind == DiagnosticArtifact.Kind.SCREENSHOT:
            react(instance)

    post_save.connect(stored, sender=DiagnosticArtifact, weak=False)
    try:
        yield
    finally:
        post_save.disconnect(stored, sender=DiagnosticArtifact)


@pytest.mark.parametrize("leased", [True, False])
def test_a_takeover_pause_is_visible_before_its_capture_which_lands_after(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str], leased: bool
) -> None:
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    if leased:  # the run holds the agent lease from its last step; else one is taken for the capture
        act(api, runner_key, run_id, "type", "type-note-01", selector="#note", text=NOTE)
    lease = Run.objects.get(pk=run_id).executor_lease
    seen: list[str] = []
    with on_capture_stored(lambda artifact: seen.append(Run.objects.get(pk=run_id).status)):
        act(api, runner_key, run_id, "request_takeover", "takeover-001", reason="captcha")
    # The pause was committed (and so visible) before the page was captured.
    assert seen == ["waiting_for_input"]
    events = list(RunEvent.objects.filter(run_id=run_id).order_by("id").values_list("kind", "data"))
    kinds = [kind for kind, _ in events]
    assert kinds.index("run_paused") < kinds.index("screenshot_captured"), kinds
    artifact_id = events[kinds.index("screenshot_captured")][1]["artifact_id"]
    assert events[kinds.index("screenshot_captured")][1] == {"artifact_id": artifact_id, "trigger": "paused"}
    last = artifact_png(api, runner_key, artifact_id)
    assert edges(last, box_of(screen, "#pw")) < 0.5  # masked like every capture
    assert api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()["screenshot_artifact_id"] == artifact_id
    # The run keeps its computer and the lease it held; a lease taken only for the capture is gone.
    after = Run.objects.get(pk=run_id)
    assert after.holds_computer and after.executor_lease == lease
    assert on_executor(screen, lambda: _control_state(screen)) == ("leased" if leased else "available")


async def _control_state(screen: Any) -> str:
    return str(screen.control.state)


@pytest.mark.parametrize("move_on", ["continue", "cancel"])
def test_a_pause_capture_is_not_recorded_once_the_run_moved_on(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str], move_on: str
) -> None:
    """Continued (its continuation inherits the computer and the lease) or cancelled while its
    capture was on its way: the capture might show what came after, so the run does not name it."""
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    act(api, runner_key, run_id, "type", "type-note-01", selector="#note", text=NOTE)

    def moved_on(artifact: DiagnosticArtifact) -> None:
        body = {"idempotency_key": "continue-0001"} if move_on == "continue" else {}
        answer = api.post(f"/api/runs/{run_id}/{move_on}", body, key=runner_key)
        assert answer.status_code in (200, 201), answer.content

    with on_capture_stored(moved_on):
        act(api, runner_key, run_id, "request_takeover", "takeover-001", reason="captcha")
    assert Run.objects.get(pk=run_id).status == ("continued" if move_on == "continue" else "cancelled")
    kinds = list(RunEvent.objects.filter(run_id=run_id).order_by("id").values_list("kind", flat=True))
    assert "run_paused" in kinds and "screenshot_captured" not in kinds, kinds
    assert DiagnosticArtifact.objects.filter(kind="screenshot").count() == 2  # the type step's, and this one
    assert api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()["screenshot_artifact_id"] != (
        DiagnosticArtifact.objects.filter(kind="screenshot").latest("created_at").pk
    )


def test_a_pause_that_frees_the_computer_is_captured_before_the_next_run_gets_it(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str]
) -> None:
    api = Api(Client())
    first = make_run()
    reset_executor(screen, FORM)
    act(api, runner_key, first, "type", "type-note-01", selector="#note", text=NOTE)
    held = Run.objects.get(pk=first)
    assert held.holds_computer and held.executor_lease
    second = make_run()
    assert Run.objects.get(pk=second).status == "queued"
    run_pause(run=held, pause=CredentialPause(kind="credential", reason="missing_information", request_id=held.id))
    events = list(RunEvent.objects.filter(run_id=first).order_by("id").values_list("kind", "data"))
    paused_at = [kind for kind, _ in events].index("run_paused")
    captures = [i for i, (kind, data) in enumerate(events) if kind == "screenshot_captured" and data["trigger"] == "paused"]
    assert len(captures) == 1 and captures[0] < paused_at, events
    artifact_png(api, runner_key, events[captures[0]][1]["artifact_id"])
    # The computer went to the next run with no lease of the first left on it.
    after = Run.objects.get(pk=second)
    assert (after.status, after.holds_computer) == ("running", True)
    answer = act(api, runner_key, second, "extract_text", "extract-0001", selector="h1")
    assert "Sign in to the portal" in answer["result"]["content"], answer


def test_no_capture_while_a_person_holds_control(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str]
) -> None:
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    on_executor(screen, screen.control.takeover)
    answer = act(api, runner_key, run_id, "type", "type-note-01", selector="#note", text=NOTE)
    assert answer["result"]["code"] == "computer.human_control" and "artifact_id" not in answer["result"]
    assert Run.objects.get(pk=run_id).status == "waiting_for_input"
    assert not RunEvent.objects.filter(run_id=run_id, kind="screenshot_captured").exists()
    assert not DiagnosticArtifact.objects.exists()


def test_captures_past_their_retention_are_swept_with_their_files(
    screen: Any, live_origin: str, runner_key: str, make_run: Callable[..., str], settings: Any
) -> None:
    api = Api(Client())
    run_id = make_run()
    reset_executor(screen, FORM)
    artifact_id = act(api, runner_key, run_id, "screenshot", "screenshot-01")["result"]["artifact_id"]
    name = DiagnosticArtifact.objects.get(pk=artifact_id).storage_name
    assert storages["artifacts"].exists(name)
    settings.RAM_ARTIFACT_RETENTION_DAYS = 1
    assert tasks.sweep()["expired_artifacts"] == 0
    settings.RAM_ARTIFACT_RETENTION_DAYS = 0
    assert tasks.sweep()["expired_artifacts"] == 1
    assert not DiagnosticArtifact.objects.exists() and not storages["artifacts"].exists(name)
    assert api.get(f"/api/artifacts/{artifact_id}", key=runner_key).status_code == 404
    # The step still names it; the page and the observation no longer offer it.
    assert api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()["screenshot_artifact_id"] is None
    assert json.loads(api.get(f"/api/runs/{run_id}/steps", key=runner_key).content)["steps"][0]["artifact_ids"] == [
        artifact_id
    ]
