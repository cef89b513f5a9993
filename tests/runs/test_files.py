"""Downloads and uploads through a real computer (Chromium) and local pages.

A download becomes an artifact of the account (file name, content type, size, SHA-256) named in
the step's result and the run's events, fetched with a runner key; a file a harness uploads
(``POST /api/artifacts``, size- and type-limited) is set on a page's file input by the
``upload`` tool and reaches the page's server byte for byte.
Browser tools of external runs run in a thread of their own, so these tests commit.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.storage import FileSystemStorage, storages
from django.test import Client, override_settings

from accounts.models import Account
from accounts.services import account_top_up, api_key_create
from computers.models import Computer, DiagnosticArtifact
from runs.models import RunEvent, RunStep
from tests.conftest import Api
from tests.support.files_site import REPORT, FilesSite, serve_files_site
from tests.support.screen import on_executor

pytestmark = pytest.mark.django_db(transaction=True)

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[FilesSite]:
    with serve_files_site() as served:
        allow_egress(served.origin)
        yield served


@pytest.fixture
def run_id(api: Api, account: Account, runner_key: str, screen: Any) -> str:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    created = api.post(
        "/api/runs", {"task": {"goal": "files", "steps": []}, "computer_id": "pc-1", "agent": {"type": "external"}}, key=runner_key
    )
    assert created.status_code == 201, created.content
    return str(created.json()["id"])


def act(api: Api, key: str, run_id: str, tool: str, idempotency_key: str, **arguments: Any) -> Any:
    answer = api.post(
        f"/api/runs/{run_id}/actions",
        {"tool": tool, "arguments": arguments, "idempotency_key": idempotency_key},
        key=key,
    )
    assert answer.status_code == 200, answer.content
    return answer.json()


def upload(client: Client, key: str, data: bytes, content_type: str, filename: str | None = "statement.pdf") -> Any:
    path = "/api/artifacts" + (f"?filename={filename}" if filename is not None else "")
    # Named in the environ too: the test client leaves the type off an empty body.
    return client.post(
        path, data=data, content_type=content_type, CONTENT_TYPE=content_type, HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def test_a_download_becomes_an_artifact_in_the_steps_and_events(
    screen: Any, site: FilesSite, runner_key: str, observer_key: str, run_id: str
) -> None:
    api = Api(Client())
    act(api, runner_key, run_id, "navigate", "navigate-001", url=f"{site.origin}/files")
    clicked = act(api, runner_key, run_id, "click", "click-report", selector="#report")
    result = clicked["result"]
    assert result["isError"] is False, result
    [download] = result["downloads"]
    digest = hashlib.sha256(REPORT).hexdigest()
    assert download == {
        "outcome": "stored",
        "artifact_id": download["artifact_id"],
        "filename": "report-2026-11.csv",
        "content_type": "text/csv",
        "size": len(REPORT),
        "sha256": digest,
    }
    assert f"report-2026-11.csv stored as artifact {download['artifact_id']}" in result["content"]
    stored = DiagnosticArtifact.objects.get(pk=download["artifact_id"])
    assert (stored.kind, stored.account_id, stored.computer_id) == ("download", screen_account(run_id), "pc-1")
    # Fetched by a runner key: the same bytes, as an attachment named after the file, with its digest.
    fetched = api.get(f"/api/artifacts/{download['artifact_id']}", key=runner_key)
    assert fetched.status_code == 200 and fetched.content == REPORT
    assert fetched["Content-Type"] == "text/csv"
    assert fetched["Content-Disposition"] == 'attachment; filename="report-2026-11.csv"'
    assert fetched["Repr-Digest"] == f"sha-256=:{base64.b64encode(hashlib.sha256(REPORT).digest()).decode()}:"
    assert fetched["X-Content-Type-Options"] == "nosniff" and "sandbox" in fetched["Content-Security-Policy"]
    # The step names it among its artifacts (after its masked screenshot); the events record it.
    step = api.get(f"/api/runs/{run_id}/steps", key=runner_key).json()["steps"][1]
    assert step["artifact_ids"][-1] == download["artifact_id"] and len(step["artifact_ids"]) == 2
    event = RunEvent.objects.get(run_id=run_id, kind="download_stored")
    assert event.data == {"index": 1, **{k: v for k, v in download.items() if k != "outcome"}}
    # The observation's screenshot is never the download.
    seen = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert seen["screenshot_artifact_id"] == step["artifact_ids"][0]
    # A task_observer key may not fetch it; another account finds no such artifact.
    assert api.get(f"/api/artifacts/{download['artifact_id']}", key=observer_key).status_code == 403
    other = Account.objects.create(name="Other")
    _, other_key = api_key_create(account=other, kind="runner")
    assert api.get(f"/api/artifacts/{download['artifact_id']}", key=other_key).status_code == 404
    # The download area keeps nothing once the file is an artifact.
    assert on_executor(screen, lambda: _no_pending(screen)) == []


async def _no_pending(executor: Any) -> list[Any]:
    return [*executor.downloads.running, *executor.downloads.finished]


def screen_account(run_id: str) -> Any:
    return Computer.objects.get(pk="pc-1").account_id


def test_a_download_over_the_limit_is_refused_and_nothing_is_stored(
    screen: Any, site: FilesSite, runner_key: str, run_id: str, settings: Any
) -> None:
    api = Api(Client())
    settings.RAM_DOWNLOAD_MAX_BYTES = 1000
    site.big_bytes = 1001
    act(api, runner_key, run_id, "navigate", "navigate-001", url=f"{site.origin}/files")
    clicked = act(api, runner_key, run_id, "click", "click-big-01", selector="#big")
    assert clicked["result"]["downloads"] == [
        {"outcome": "refused", "filename": "big.bin", "size": 1001, "reason": "too_large"}
    ]
    assert not DiagnosticArtifact.objects.filter(kind="download").exists()
    event = RunEvent.objects.get(run_id=run_id, kind="download_refused")
    assert event.data == {"index": 1, "filename": "big.bin", "size": 1001, "reason": "too_large"}
    # At the limit it is kept.
    site.big_bytes = 1000
    kept = act(api, runner_key, run_id, "click", "click-big-02", selector="#big")["result"]["downloads"]
    assert [d["outcome"] for d in kept] == ["stored"] and kept[0]["size"] == 1000


def test_a_takeover_cancels_a_running_download_and_the_run_hears_of_it(
    screen: Any, site: FilesSite, runner_key: str, run_id: str, settings: Any
) -> None:
    api = Api(Client())
    settings.RAM_DOWNLOAD_WAIT_SECONDS = 0
    act(api, runner_key, run_id, "navigate", "navigate-001", url=f"{site.origin}/files")
    act(api, runner_key, run_id, "click", "click-slow-1", selector="#slow")
    assert on_executor(screen, lambda: _running(screen)) == 1
    grant, counters = on_executor(screen, screen.control.takeover)
    assert counters.cancelled_downloads == 1
    on_executor(screen, lambda: _settled(screen))
    reported = on_executor(screen, lambda: screen.downloads.report(float("inf")))
    assert reported == [{"outcome": "cancelled", "filename": "slow.bin"}]
    assert not DiagnosticArtifact.objects.filter(kind="download").exists()


async def _running(executor: Any) -> int:
    return len(executor.downloads.running)


async def _settled(executor: Any) -> None:
    if executor.downloads.tasks:
        await asyncio.wait(set(executor.downloads.tasks), timeout=10)


def test_an_uploaded_file_is_set_on_a_file_input_and_reaches_the_page(
    screen: Any, site: FilesSite, runner_key: str, run_id: str
) -> None:
    api = Api(Client())
    answer = upload(Client(), runner_key, PDF, "application/pdf")
    assert answer.status_code == 201, answer.content
    artifact = answer.json()
    assert artifact == {
        "id": artifact["id"],
        "kind": "upload",
        "filename": "statement.pdf",
        "content_type": "application/pdf",
        "size": len(PDF),
        "sha256": hashlib.sha256(PDF).hexdigest(),
        "created_at": artifact["created_at"],
    }
    assert api.get(f"/api/artifacts/{artifact['id']}", key=runner_key).content == PDF
    act(api, runner_key, run_id, "navigate", "navigate-001", url=f"{site.origin}/upload")
    set_file = act(api, runner_key, run_id, "upload", "upload-0001", selector="#doc", artifact_id=artifact["id"])
    assert set_file["result"] == {
        "content": f"The file input now holds statement.pdf ({len(PDF)} bytes, application/pdf).",
        "isError": False,
    }
    act(api, runner_key, run_id, "click", "click-send-1", selector="#send")
    act(api, runner_key, run_id, "wait_for", "wait-sent-01", selector="#received:has-text('Received statement.pdf')")
    assert site.received == [("statement.pdf", "application/pdf", PDF)]
    shown = act(api, runner_key, run_id, "extract_text", "extract-0001", selector="#received")["result"]["content"]
    assert shown == f"Received statement.pdf {hashlib.sha256(PDF).hexdigest()}"
    step = RunStep.objects.get(run_id=run_id, tool="upload")
    assert step.summary["artifact_id"] == artifact["id"] and step.summary["selector"] == "#doc"


def test_the_upload_tool_takes_only_an_upload_of_the_runs_account(
    screen: Any, site: FilesSite, runner_key: str, run_id: str
) -> None:
    api = Api(Client())
    other = Account.objects.create(name="Other")
    _, other_key = api_key_create(account=other, kind="runner")
    theirs = upload(Client(), other_key, PDF, "application/pdf").json()["id"]
    act(api, runner_key, run_id, "navigate", "navigate-001", url=f"{site.origin}/upload")
    shot = act(api, runner_key, run_id, "screenshot", "screenshot-01")["result"]["artifact_id"]
    for n, artifact_id in enumerate((theirs, shot, "6f1c0b7e-0000-4000-8000-000000000000")):
        refused = act(api, runner_key, run_id, "upload", f"upload-000{n}", selector="#doc", artifact_id=artifact_id)
        assert refused["result"]["isError"] is True and refused["result"]["code"] == "artifact.not_found", refused
    count = on_executor(screen, lambda: screen.page.evaluate("document.getElementById('doc').files.length"))
    assert count == 0
    # Not an artifact id at all: refused before anything runs.
    bad = api.post(
        f"/api/runs/{run_id}/actions",
        {"tool": "upload", "arguments": {"selector": "#doc", "artifact_id": "x"}, "idempotency_key": "upload-bad-1"},
        key=runner_key,
    )
    assert bad.status_code == 400 and "error" in bad.json()


@pytest.mark.parametrize(
    ("data", "content_type", "filename", "status"),
    [
        (PDF, "application/x-msdownload", "statement.pdf", 415),  # a type not accepted
        (b"MZ not a pdf", "application/pdf", "statement.pdf", 415),  # bytes that are not of the type
        (PDF, "application/pdf", None, 400),  # no file name
        (PDF, "application/pdf", "../etc/passwd", 400),  # a path, not a name
        (b"", "text/plain", "empty.txt", 400),  # nothing
        (b"x" * 101, "text/plain", "big.txt", 413),  # over RAM_UPLOAD_MAX_BYTES
    ],
)
def test_a_refused_upload_answers_the_error_shape_and_stores_nothing(
    db: None, runner_key: str, settings: Any, data: bytes, content_type: str, filename: str | None, status: int
) -> None:
    settings.RAM_UPLOAD_MAX_BYTES = 100
    before = _stored_files()
    answer = upload(Client(), runner_key, data, content_type, filename)
    assert answer.status_code == status, answer.content
    assert set(answer.json()) == {"error"} and answer.json()["error"]
    assert not DiagnosticArtifact.objects.exists()
    assert _stored_files() == before


def test_only_runner_keys_upload(db: None, observer_key: str) -> None:
    assert upload(Client(), observer_key, PDF, "application/pdf").status_code == 403
    assert Client().post("/api/artifacts?filename=a.pdf", data=PDF, content_type="application/pdf").status_code == 401
    assert not DiagnosticArtifact.objects.exists()


def _stored_files() -> list[str]:
    storage = storages["artifacts"]
    found: list[str] = []

    def walk(prefix: str) -> None:
        if prefix and not storage.exists(prefix):
            return
        directories, names = storage.listdir(prefix)
        found.extend(f"{prefix}/{n}" for n in names)
        for d in directories:
            walk(f"{prefix}/{d}" if prefix else d)

    walk("")
    return sorted(found)


class FullDiskStorage(FileSystemStorage):
    """The artifacts' file storage on a device with no space left: every byte goes to /dev/full,
    which the kernel answers with ENOSPC."""

    def _save(self, name: str, content: Any) -> str:
        with open("/dev/full", "wb") as device:
            for chunk in content.chunks():
                device.write(chunk)
            device.flush()
        return name


def test_a_full_disk_refuses_the_upload_with_a_clear_error_and_recovers(
    db: None, runner_key: str, tmp_path: Any
) -> None:
    full = {**django_settings.STORAGES, "artifacts": {"BACKEND": f"{__name__}.FullDiskStorage", "OPTIONS": {"location": str(tmp_path)}}}
    with override_settings(STORAGES=full):
        refused = upload(Client(), runner_key, PDF, "application/pdf")
        assert refused.status_code == 503, refused.content
        assert refused.json() == {"error": "The server's file storage is full; nothing was stored. Try again later."}
        assert not DiagnosticArtifact.objects.exists()
        assert not list(tmp_path.rglob("*.bin"))
    # Space again: the same upload is stored.
    stored = upload(Client(), runner_key, PDF, "application/pdf")
    assert stored.status_code == 201, stored.content
    assert DiagnosticArtifact.objects.count() == 1
