"""The executor's private interface as workers use it: token, agent lease and
actions, and a person's takeover stopping the agent's work."""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from computers.client import ExecutorClient, ExecutorError, HumanHasControl
from computers.models import Computer, DiagnosticArtifact
from executor.runtime import Executor
from tests.support.screen import LOCAL_AND_CDP, executor_on, on_executor
from tests.support.tiers import live

FORM = """<!doctype html><title>Form</title>
<input id=name><button id=go onclick="document.getElementById('out').textContent='hello ' + document.getElementById('name').value">Go</button>
<p id=out></p><a id=file href="{slow}" download>file</a>"""


class SlowFile(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Disposition", "attachment; filename=big.bin")
        self.send_header("Content-Length", str(10_000_000))
        self.end_headers()
        try:
            for _ in range(200):
                self.wfile.write(b"x" * 1000)
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
@live
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """This suite runs on the executor's own Chromium and on one reached over CDP."""
    yield from executor_on(request.param)


@pytest.fixture
@live
def slow_file(allow_egress: Callable[[str], None]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowFile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    allow_egress(f"127.0.0.1:{server.server_address[1]}")
    yield f"http://127.0.0.1:{server.server_address[1]}/big.bin"
    server.shutdown()


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def test_the_interface_refuses_a_connection_without_the_token(screen: Any) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://{screen.address}/", additional_headers={"Authorization": "Bearer wrong"}, proxy=None)
    assert refused.value.response.status_code == 401


def test_the_executor_serves_on_loopback_with_its_generation(screen: Any) -> None:
    computer = Computer.objects.get(pk="pc-1")
    assert computer.executor_address.startswith("127.0.0.1:")
    assert str(computer.generation) == str(screen.generation)
    assert client().status()["generation"] == str(screen.generation)


def test_agent_actions_run_under_a_lease(screen: Any, live_origin: str, allow_egress: Callable[[str], None]) -> None:
    allow_egress(live_origin)
    executor = client()
    lease = executor.lease_acquire()
    assert executor.status()["control"] == "leased"
    on_executor(screen, lambda: screen.page.set_content(FORM.format(slow="about:blank")))
    executor.type(lease, "#name", "Ana")
    executor.click(lease, "#go")
    executor.wait_for(lease, "#out", timeout_ms=5000)
    assert executor.extract_text(lease, "#out") == "hello Ana"
    assert "hello Ana" in executor.extract_text(lease)
    executor.press(lease, "Tab")
    shot = executor.screenshot(lease)
    stored = DiagnosticArtifact.objects.get(pk=shot["artifact_id"])
    assert stored.kind == "screenshot" and stored.account_id == Computer.objects.get(pk="pc-1").account_id
    assert stored.data.startswith(b"\x89PNG") and "data_base64" not in shot
    assert executor.navigate(lease, f"{live_origin}/accounts/login/")["url"].startswith(live_origin)
    with pytest.raises(ExecutorError) as refused:
        executor.navigate("not-the-lease", "https://example.com/")
    assert refused.value.reason == "lease_invalid"
    executor.lease_release(lease)
    assert executor.status()["control"] == "available"


def test_invalid_action_arguments_are_refused(screen: Any) -> None:
    executor = client()
    lease = executor.lease_acquire()
    for action, args in [("navigate", {"url": "file:///etc/passwd"}), ("click", {}), ("teleport", {})]:
        with pytest.raises(ExecutorError) as refused:
            executor.action(lease, action, **args)
        assert refused.value.reason == "bad_request"
    executor.lease_release(lease)


def test_a_takeover_stops_the_agents_work_and_its_next_action_fails(screen: Any, slow_file: str) -> None:
    on_executor(screen, lambda: screen.page.set_content(FORM.format(slow=slow_file)))
    executor = client()
    lease = executor.lease_acquire()
    executor.click(lease, "#file")  # a download starts and keeps going
    for _ in range(100):
        if screen.downloads.running:
            break
        time.sleep(0.05)
    outcome: dict[str, Any] = {}

    def wait_forever() -> None:
        try:
            client().wait_for(lease, "#never", timeout_ms=15_000)
        except ExecutorError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=wait_forever)
    worker.start()
    for _ in range(100):
        if screen.control.agent_tasks:
            break
        time.sleep(0.05)
    grant = executor.call("takeover")
    worker.join(timeout=20)
    assert grant["stopped_processes"] == 1
    assert grant["cancelled_downloads"] == 1
    assert grant["aborted_exports"] == 0
    assert isinstance(outcome.get("error"), HumanHasControl)
    with pytest.raises(HumanHasControl) as refused:
        executor.click(lease, "#go")
    assert "human" in refused.value.message.lower()
    with pytest.raises(HumanHasControl):
        executor.lease_acquire()
    executor.call("grant_release", grant_id=grant["grant_id"])
    # Released: the agent regains control only by an explicit new lease.
    assert executor.status()["control"] == "released"
    with pytest.raises(ExecutorError):
        executor.click(lease, "#go")
    executor.lease_release(executor.lease_acquire())


def test_a_client_of_an_older_generation_is_refused(screen: Any) -> None:
    computer = Computer.objects.get(pk="pc-1")
    computer.generation = uuid.uuid4()
    with pytest.raises(ExecutorError) as refused:
        ExecutorClient(computer).status()
    assert refused.value.reason == "generation_changed"


def test_the_executor_alone_refuses_input_without_the_current_grant(screen: Any) -> None:
    """The executor's own grant check, with no gateway in front of it: only the live grant types."""
    executor = client()
    on_executor(screen, lambda: screen.page.set_content(FORM.format(slow="about:blank")))
    on_executor(screen, lambda: screen.page.focus("#name"))
    text = {"type": "text", "text": "x"}
    for grant_id in ("made-up", ""):
        with pytest.raises(ExecutorError):
            executor.call("input", grant_id=grant_id, input=text)
    grant = executor.call("takeover")["grant_id"]
    with pytest.raises(ExecutorError):
        executor.call("input", grant_id=grant + "x", input=text)
    executor.call("input", grant_id=grant, input={"type": "text", "text": "ok"})
    executor.call("grant_release", grant_id=grant)
    with pytest.raises(ExecutorError):
        executor.call("input", grant_id=grant, input=text)  # a released grant is spent
    assert on_executor(screen, lambda: screen.page.input_value("#name")) == "ok"
