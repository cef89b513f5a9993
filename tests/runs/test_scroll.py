"""The scroll tool end to end: its executor action on a real Chromium, and a run through the loop."""

from __future__ import annotations

from typing import Any

from accounts.models import Account
from accounts.services import account_top_up
from computers.client import ExecutorClient
from computers.models import Computer
from runs import loop
from runs.models import Run
from tests.support.screen import on_executor


def step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


# --- scroll, end to end on a real executor ------------------------------------------------

TALL = "<!doctype html><title>Tall</title><body style='margin:0'><div style='height:6000px;width:4000px'>top</div>"


def test_scroll_turns_the_wheel_at_the_viewports_centre(screen: Any) -> None:
    on_executor(screen, lambda: screen.page.set_content(TALL))

    async def centre_listener() -> None:
        await screen.page.evaluate(
            "() => { window.wheelAt = null; window.addEventListener('wheel', e => { window.wheelAt = [e.clientX, e.clientY]; }); }"
        )

    on_executor(screen, centre_listener)
    executor = ExecutorClient(Computer.objects.get(pk="pc-1"))
    lease = executor.lease_acquire()
    try:
        reply = executor.scroll(lease, delta_x=0, delta_y=1500)
    finally:
        executor.lease_release(lease)
    assert reply["scroll_y"] > 0
    assert on_executor(screen, lambda: screen.page.evaluate("() => window.wheelAt")) == [640, 360]


def test_a_run_scrolls_through_the_loop(screen: Any, account: Account) -> None:
    on_executor(screen, lambda: screen.page.set_content(TALL))
    account_top_up(account=account, microcredits=10_000, actor="test")
    run = Run.objects.create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "scroll", "steps": [step("scroll", delta_y=800), step("finish", output="ok")]},
        microcredits_per_model_call=1,
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    assert run.status == "succeeded"
    scrolled = run.steps.get(index=0)
    assert scrolled.summary == {"tool": "scroll", "delta_y": 800, "isError": False}
    assert scrolled.result["content"].startswith("Scrolled; the page is now at x=0, y=")
    assert on_executor(screen, lambda: screen.page.evaluate("() => window.scrollY")) > 0
