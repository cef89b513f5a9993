"""A run holds its computer's agent lease for the whole run, on a real executor: kept
from step to step, renewed while a long tool runs (the executor's clock moves far past
the 30 s lease meanwhile), and released when the run pauses or ends."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from accounts.models import Account
from accounts.services import account_top_up
from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from core.clock import SYSTEM_CLOCK, ManualClock
from executor.control import AGENT_LEASE_SECONDS
from runs import loop
from runs.models import Run
from runs.services import run_create
from tests.support.screen import on_executor, reset_executor


def step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def start(account: Account, steps: list[dict[str, Any]]) -> Run:
    account_top_up(account=account, microcredits=100_000, actor="test")
    return run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "lease", "steps": steps},
        max_model_calls=10,
        microcredits_per_model_call=1,
    )


def control_of(computer_id: str = "pc-1") -> str:
    return str(ExecutorClient(Computer.objects.get(pk=computer_id)).status()["control"])


def test_the_lease_is_kept_from_step_to_step_and_released_at_the_end(screen: Any, account: Account) -> None:
    reset_executor(screen, "<title>Kept</title><p id=t>kept</p>")
    run = start(account, [step("extract_text", selector="#t"), step("extract_text", selector="#t")])
    assert loop.run_step_advance(run_id=run.id) is True
    run.refresh_from_db()
    assert run.executor_lease and screen.control.lease is not None
    assert screen.control.lease.id == run.executor_lease
    assert control_of() == "leased", "between two steps the computer stays the run's"
    first_lease = run.executor_lease
    assert loop.run_step_advance(run_id=run.id) is True
    run.refresh_from_db()
    assert run.executor_lease == first_lease, "the next step renews the same lease"
    while loop.run_step_advance(run_id=run.id):
        pass
    run.refresh_from_db()
    assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": "kept"}
    assert (run.holds_computer, run.executor_lease) == (False, "")
    assert control_of() == "available"


def test_a_pause_releases_the_lease(screen: Any, account: Account) -> None:
    reset_executor(screen, "<title>Pause</title><p id=t>x</p>")
    run = start(
        account,
        [step("extract_text", selector="#t"), step("request_credential", portal_origin="https://portal.example.com", label="Portal")],
    )
    while loop.run_step_advance(run_id=run.id):
        pass
    run.refresh_from_db()
    assert run.status == "waiting_for_input" and not run.holds_computer
    assert control_of() == "available"


LATE = """<title>Late</title><body><script>
setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<p id=late>arrived</p>'), 6000);
</script></body>"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the stepping thread shares the test database")
def test_a_tool_longer_than_the_lease_keeps_it(screen: Any, account: Account, settings: Any) -> None:
    settings.RAM_LEASE_RENEW_SECONDS = 0.1
    clock = ManualClock()
    screen.control.clock = clock
    try:
        reset_executor(screen, LATE)
        run = start(account, [step("wait_for", selector="#late", timeout_ms=15_000)])
        stepping = threading.Thread(target=_advance_once, args=(run.id,))
        stepping.start()
        deadline = time.monotonic() + 20
        while screen.control.lease is None:  # the step has taken the lease: its tool is starting
            assert time.monotonic() < deadline and stepping.is_alive(), "the step never took the lease"
            time.sleep(0.02)
        seen: list[str] = []
        moved = 0.0
        while stepping.is_alive():
            time.sleep(0.25)
            clock.advance(10.0)  # 40 s of the executor's clock per real second: the lease is 30 s
            moved += 10.0
            seen.append(control_of())
        stepping.join()
        assert moved > 3 * AGENT_LEASE_SECONDS, "the tool ran for several leases' length on the executor's clock"
        assert set(seen) == {"leased"}, f"the lease lapsed during the tool: {seen}"
        run.refresh_from_db()
        assert run.steps.get(index=0).result["isError"] is False
        with pytest.raises(ExecutorError, match="Another agent lease"):
            ExecutorClient(Computer.objects.get(pk="pc-1")).lease_acquire()
    finally:
        screen.control.clock = SYSTEM_CLOCK


def _advance_once(run_id: Any) -> None:
    try:
        loop.run_step_advance(run_id=run_id)
    finally:
        connection.close()


def test_a_person_who_took_and_gave_back_control_between_two_steps_pauses_the_run(screen: Any, account: Account) -> None:
    """The lease is used without a renewal while fresh; the executor refuses it (before acting) once
    a person took control, and the run pauses exactly as a refused renewal makes it: it never
    takes back control a person handed back."""
    reset_executor(screen, "<title>Taken</title><p id=t>x</p>")
    run = start(account, [step("extract_text", selector="#t"), step("extract_text", selector="#t")])
    assert loop.run_step_advance(run_id=run.id) is True
    grant, _ = on_executor(screen, lambda: screen.control.takeover())

    async def give_back() -> None:
        screen.control.grant_release(grant.id)

    on_executor(screen, give_back)
    assert loop.run_step_advance(run_id=run.id) is False
    run.refresh_from_db()
    second = run.steps.get(index=1).result or {}
    assert (run.status, run.pause_kind) == ("waiting_for_input", "takeover")
    assert second["code"] == "computer.human_control"
    assert str(second["content"]).startswith("A person handed control back"), second
    assert control_of() == "released", "the run took no new lease"


def test_a_lease_that_lapsed_meanwhile_is_taken_anew(screen: Any, account: Account) -> None:
    """A lease this process renewed recently but that the executor's clock let lapse: the
    executor refuses it before acting, a new lease is taken and the step runs once."""
    clock = ManualClock()
    screen.control.clock = clock
    try:
        reset_executor(screen, "<title>Lapsed</title><p id=t>lapsed</p>")
        run = start(account, [step("extract_text", selector="#t"), step("extract_text", selector="#t")])
        assert loop.run_step_advance(run_id=run.id) is True
        run.refresh_from_db()
        first_lease = run.executor_lease
        clock.advance(AGENT_LEASE_SECONDS + 1)
        assert loop.run_step_advance(run_id=run.id) is True
        run.refresh_from_db()
        assert run.executor_lease and run.executor_lease != first_lease
        assert run.steps.get(index=1).result == {"content": "lapsed", "isError": False}
        while loop.run_step_advance(run_id=run.id):
            pass
        run.refresh_from_db()
        assert run.status == "succeeded"
    finally:
        screen.control.clock = SYSTEM_CLOCK
