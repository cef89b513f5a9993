"""A run's recording through the real run loop on a real executor, and its REST endpoints.

A scripted run navigates, types and pauses for a takeover; a person takes control, sends
inputs and hands back; the run is continued and finishes. Its recording decodes with PyAV, lasts
as long as the run held its computer, and its timeline has every step, the pause, the person's
period (with its input count) and the continuation at offsets into the video."""

from __future__ import annotations

import asyncio
import base64
import io
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import av
import pytest
from django.utils import timezone
from PIL import Image

from accounts.models import Account, ApiKey
from accounts.services import account_top_up, api_key_create
from computers.artifacts import artifact_storage, artifacts_sweep
from computers.models import Computer, DiagnosticArtifact, Recording, RecordingSegment
from computers.recordings import recording_open, recording_segment_store
from computers.services import executor_token_issue
from executor import handlers, server_wire
from executor.recording import SegmentWriter
from executor.server_link import HttpServerLink, LinkError, SegmentUpload
from runs import loop
from runs.models import Run, RunEvent
from runs.recordings import recording_timeline, recording_wanted
from runs.services import run_continue, run_create
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor, reset_executor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    with serve_hostile() as served:
        allow_egress(served.origin)
        yield served


def advance(run: Run) -> Run:
    while loop.run_step_advance(run_id=run.id):
        pass
    run.refresh_from_db()
    return run


def decoded_duration_ms(segment: RecordingSegment) -> float:
    with av.open(io.BytesIO(segment.artifact.data)) as container:
        frames = list(container.decode(video=0))
        assert frames and all(f.width == 1280 and f.height == 720 for f in frames)
        return (container.duration or 0) / 1000


def test_a_scripted_run_that_navigates_types_and_pauses_for_a_takeover_is_recorded_with_its_timeline(
    screen: Any, account: Account, site: HostileSite, settings: Any
) -> None:
    settings.RAM_RECORDING_SEGMENT_SECONDS = 5
    reset_executor(screen)
    account_top_up(account=account, microcredits=100_000, actor="test")
    steps = [
        {"tool": "navigate", "arguments": {"url": site.origin + "/login"}},
        {"tool": "type", "arguments": {"selector": "#u", "text": "hello"}},
        {"tool": "request_takeover", "arguments": {"reason": "captcha"}},
        {"tool": "extract_text", "arguments": {}},
    ]
    run = run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "record", "steps": steps},
        max_model_calls=10,
        microcredits_per_model_call=1,
    )
    run = advance(run)
    assert (run.status, run.pause_kind) == ("waiting_for_input", "takeover"), run.result

    async def person() -> None:
        grant, _ = await screen.control.takeover()
        for key in ("a", "b"):
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "text", "text": key}})
        screen.control.grant_release(grant.id)

    on_executor(screen, person)
    key = ApiKey.objects.filter(account=account, kind=ApiKey.Kind.RUNNER).first()
    if key is None:

        key = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)[0]
    continued = run_continue(key=key, run_id=run.id, idempotency_key="k1")
    continuation = Run.objects.get(pk=continued.answer["run"]["id"])
    continuation = advance(continuation)
    assert continuation.status == "succeeded"

    run.refresh_from_db()
    recording = Recording.objects.get(run_id=run.id)
    assert recording.ended_at is not None
    segments = list(RecordingSegment.objects.filter(recording=recording).order_by("index"))
    assert segments
    decoded = sum(decoded_duration_ms(s) for s in segments)
    held_ms = (recording.ended_at - recording.started_at).total_seconds() * 1000
    # The video lasts as long as the recording ran (a frame's worth of slack per segment).
    assert abs(recording.duration_ms - held_ms) <= 1500, (recording.duration_ms, held_ms)
    assert abs(decoded - recording.duration_ms) <= 600 * len(segments), (decoded, recording.duration_ms)

    # The person's control: on the timeline, with its inputs, never in the video.
    assert [(p["inputs"], p["recorded"]) for p in recording.periods] == [(2, False)]


    timeline = recording_timeline(run=run)
    kinds = [e.type for e in timeline.entries]
    step_tools = [e.detail["tool"] for e in timeline.entries if e.type == "step"]
    assert step_tools == ["navigate", "type", "request_takeover"]
    assert "pause" in kinds and "person_control" in kinds and "continuation" in kinds
    typed = next(e for e in timeline.entries if e.type == "step" and e.detail["tool"] == "type")
    assert "hello" not in str(typed.detail)
    offsets = [e.offset_ms for e in timeline.entries]
    assert offsets == sorted(offsets) and max(offsets) <= recording.duration_ms + 1500

    # The continuation's recording starts with its own steps.
    own = Recording.objects.get(run_id=continuation.id)
    assert own.started_at >= recording.started_at
    assert [e.detail["tool"] for e in recording_timeline(run=continuation).entries if e.type == "step"] == [
        "extract_text",
        "finish",
    ]


def _stored_recording(run: Run) -> Recording:
    recording, _ = recording_open(computer=run.computer, run_id=run.id, record_human=False)  # type: ignore[arg-type]
    writer = SegmentWriter(fps=2)
    image = Image.new("RGB", (1280, 720), (250, 250, 250))
    for pts in (0, 500, 1000):
        writer.add(image, pts)
    data = writer.close()

    body = server_wire.InternalRecordingSegment(
        recording_id=recording.id,
        index=0,
        offset_ms=0,
        duration_ms=1000,
        frames=3,
        final=True,
        capped="",
        periods=[],
        data=base64.b64encode(data).decode(),
    )
    assert recording_segment_store(computer_id=run.computer_id, body=body) is True  # type: ignore[arg-type]
    return recording


def test_the_recording_endpoint_answers_runner_keys_with_ranges_and_refuses_everyone_else(
    api: Any, account: Account, computer: Computer, runner_key: str, observer_key: str, make_account: Any, make_key: Any
) -> None:
    run = run_create(account=account, computer=computer, task={"goal": "x"}, max_model_calls=3)
    path = f"/api/runs/{run.id}/recording"
    assert api.get(path, runner_key).status_code == 404
    assert api.get(path + "/timeline", runner_key).status_code == 404
    _stored_recording(run)
    whole = api.get(path, runner_key)
    assert whole.status_code == 200 and whole["Content-Type"] == "video/webm" and whole["Accept-Ranges"] == "bytes"
    body = whole.content
    assert body.startswith(b"\x1a\x45\xdf\xa3")
    part = api.client.get(path, headers={"Authorization": f"Bearer {runner_key}", "Range": "bytes=0-99"})
    assert part.status_code == 206 and part.content == body[:100]
    assert part["Content-Range"] == f"bytes 0-99/{len(body)}"
    tail = api.client.get(path, headers={"Authorization": f"Bearer {runner_key}", "Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == body[-10:]
    beyond = api.client.get(path, headers={"Authorization": f"Bearer {runner_key}", "Range": f"bytes={len(body)}-"})
    assert beyond.status_code == 416 and beyond["Content-Range"] == f"bytes */{len(body)}"
    assert api.get(path, runner_key, segment="1").status_code == 404
    assert api.get(path, runner_key, segment="x").status_code == 400
    # A task_observer key has no visual access; another account's key does not find the run.
    assert api.get(path, observer_key).status_code == 403
    assert api.get(path + "/timeline", observer_key).status_code == 403
    assert api.get(path, make_key(make_account())).status_code == 404
    timeline = api.get(path + "/timeline", runner_key).json()
    assert timeline["recording"]["segments"] == [
        {"index": 0, "offset_ms": 0, "duration_ms": 1000, "size": len(body), "frames": 3}
    ]
    assert timeline["recording"]["person_control_recorded"] is False
    assert RunEvent.objects.filter(run=run, kind="recording_played").count() == 0


def test_a_run_created_with_recording_false_or_with_recordings_off_has_none(
    api: Any, account: Account, computer: Computer, runner_key: str, settings: Any
) -> None:
    made = api.post(
        "/api/runs",
        {
            "task": {"goal": "x", "steps": [{"tool": "extract_text", "arguments": {}}]},
            "computer_id": computer.handle,
            "agent": {"type": "scripted"},
            "recording": False,
        },
        runner_key,
    )
    assert made.status_code == 201, made.content

    assert recording_wanted(Run.objects.get(pk=made.json()["id"])) is False
    run = run_create(account=account, computer=computer, task={"goal": "x"}, max_model_calls=3)
    assert recording_wanted(run) is True
    settings.RAM_RECORDING = False
    assert recording_wanted(run) is False
    refused = api.post(
        "/api/runs", {"task": {"goal": "x"}, "computer_id": computer.handle, "recording": "sometimes"}, runner_key
    )
    assert refused.status_code == 400


def test_segments_of_another_computer_s_recording_are_not_kept(
    account: Account, computer: Computer, make_computer: Any
) -> None:
    other = make_computer(account, "pc-2")
    recording, _ = recording_open(computer=computer, run_id=uuid.uuid4(), record_human=False)
    body = server_wire.InternalRecordingSegment(
        recording_id=recording.id,
        index=0,
        offset_ms=0,
        duration_ms=0,
        frames=0,
        final=True,
        capped="",
        periods=[],
        data="",
    )
    assert recording_segment_store(computer_id=other.pk, body=body) is False
    recording.refresh_from_db()
    assert recording.ended_at is None


def test_recordings_are_swept_after_their_own_retention_with_their_files(
    account: Account, computer: Computer, settings: Any
) -> None:



    settings.RAM_ARTIFACT_RETENTION_DAYS = 1
    settings.RAM_RECORDING_RETENTION_DAYS = 10
    run = run_create(account=account, computer=computer, task={"goal": "x"}, max_model_calls=3)
    recording = _stored_recording(run)
    segment = RecordingSegment.objects.get(recording=recording)
    name = segment.artifact.storage_name
    # Older than the artifacts' retention, younger than the recordings': kept.
    five_days_ago = timezone.now() - timedelta(days=5)
    Recording.objects.filter(pk=recording.pk).update(started_at=five_days_ago)
    DiagnosticArtifact.objects.filter(pk=segment.artifact_id).update(created_at=five_days_ago)
    artifacts_sweep()
    assert RecordingSegment.objects.filter(pk=segment.pk).exists() and artifact_storage().exists(name)
    # Past its own retention: the recording, its segments, their artifacts and files go.
    Recording.objects.filter(pk=recording.pk).update(started_at=timezone.now() - timedelta(days=11))
    assert artifacts_sweep() >= 1
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert not DiagnosticArtifact.objects.filter(pk=segment.artifact_id).exists()
    assert not artifact_storage().exists(name)


def test_an_executor_process_sends_its_segments_over_the_internal_endpoint(
    live_origin: str, account: Account, computer: Computer
) -> None:
    """The link a ``run_executor`` process uses (HTTP, its own token): a segment is stored; one naming
    another computer's recording is not kept, and a body that is no WebM is a 400."""


    recording, _ = recording_open(computer=computer, run_id=uuid.uuid4(), record_human=False)
    writer = SegmentWriter(fps=2)
    image = Image.new("RGB", (1280, 720), (10, 120, 10))
    writer.add(image, 0)
    writer.add(image, 900)
    data = writer.close()
    segment = {
        "recording_id": str(recording.id), "index": 0, "offset_ms": 0, "duration_ms": 900, "frames": 2,
        "final": True, "capped": "", "periods": [{"start_ms": 100, "end_ms": 300, "inputs": 1, "recorded": False}],
    }  # fmt: skip
    link = HttpServerLink(
        base_url=live_origin, computer_id=computer.pk, token=executor_token_issue(computer_id=computer.pk)
    )
    with pytest.raises(LinkError) as refused:
        asyncio.run(link.recording_segment_store(SegmentUpload(data=b"not a video", **segment)))
    assert refused.value.status == 400
    asyncio.run(link.recording_segment_store(SegmentUpload(data=data, **segment)))
    stored = RecordingSegment.objects.get(recording=recording)
    assert stored.artifact.data == data and stored.duration_ms == 900
    recording.refresh_from_db()
    assert recording.ended_at is not None and recording.periods[0]["inputs"] == 1
    other = Computer.objects.create(id="pc-other", account=account, name="other")
    intruder = HttpServerLink(
        base_url=live_origin, computer_id=other.pk, token=executor_token_issue(computer_id=other.pk)
    )
    asyncio.run(intruder.recording_segment_store(SegmentUpload(data=data, **{**segment, "index": 1})))
    assert RecordingSegment.objects.filter(recording=recording).count() == 1
