"""The handler of each operation of the executor's private interface (executor/ops.py).

A handler is ``handler(executor, peer, args)``: ``args`` is the operation's argument model
(``@takes``; a caller in the process, a test, may pass a dict, validated the same way) and
its result is checked against the operation's reply model before it is sent
(``executor/rpc.py``). The registry checks, at import, that every operation has its handler.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core.contracts import Closed
from core.metrics import EXECUTOR_INPUTS
from executor import actions, ops, recording, taint
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH, DialogInput, KeyInput, TabInput, TextInput
from executor.control import HUMAN_GRANT_SECONDS, ControlError
from executor.dialogs import Pending
from executor.downloads import DOWNLOADING
from executor.rpc import Peer

if TYPE_CHECKING:
    from executor.runtime import Executor

# An operation's handler as the dispatcher and in-process callers call it.
type Handler[A] = Callable[[Executor, Peer | None, A | dict[str, Any]], Awaitable[dict[str, Any]]]


def takes[A: Closed](
    model: type[A],
) -> Callable[[Callable[[Executor, Peer | None, A], Awaitable[dict[str, Any]]]], Handler[A]]:
    """An operation's handler, given its arguments as their model (executor/ops.py): the RPC server
    passes them validated; a caller in the process (a test) may pass a dict, validated the same way."""

    def wrap(handler: Callable[[Executor, Peer | None, A], Awaitable[dict[str, Any]]]) -> Handler[A]:
        @functools.wraps(handler)
        async def parsed(ex: Executor, peer: Peer | None, args: A | dict[str, Any]) -> dict[str, Any]:
            return await handler(ex, peer, args if isinstance(args, model) else model.model_validate(args))

        parsed.args_model = model  # type: ignore[attr-defined]
        return parsed

    return wrap


@takes(ops.NoArgs)
async def op_hello(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    return {
        "computer_id": ex.computer_id,
        "generation": str(ex.generation),
        "control": ex.control.state,
        "viewport": {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT},
    }


@takes(ops.NoArgs)
async def op_status(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    ex.control.expire()
    return {
        "generation": str(ex.generation),
        "control": ex.control.state,
        "url": ex.page.url,
        "tabs": await ex.pages.tabs_describe(),
        "dialogs": ex.pages.dialogs.describe(),
        "subscribers": len(ex.feed.subscribers),
        "screencasting": ex.feed.screencasting,
        "raw_frames": ex.feed.raw_frames,
        "screencast_refreshes": ex.feed.pacer.refreshes,
        "inputs": ex.inputs_dispatched,
    }


@takes(ops.ObserveArgs)
async def op_observe(ex: Executor, peer: Peer | None, args: ops.ObserveArgs) -> dict[str, Any]:
    """Read the page without touching it (no lease): address, title and visible text, bounded.

    ``innerText`` never includes what is typed into inputs, so a typed password is never in it.
    """
    limit = args.max_chars
    if ex.pages.dialogs.on_page(ex.page) is not None:
        # A page blocked by a dialog answers nothing until the dialog is answered.
        title, text = next((t["title"] for t in await ex.pages.tabs_describe() if t["active"]), ""), ""
    else:
        title = await ex.page.title()
        text = str(await ex.page.evaluate("() => document.body ? document.body.innerText : ''") or "")
    return {
        "url": ex.page.url,
        "title": str(title)[:500],
        "text": text[:limit],
        "truncated": len(text) > limit,
        "control": ex.control.state,
        "tabs": await ex.pages.tabs_describe(),
        "dialogs": ex.pages.dialogs.describe(),
    }


@takes(ops.ArgumentsCheckArgs)
async def op_arguments_check(ex: Executor, peer: Peer | None, args: ops.ArgumentsCheckArgs) -> dict[str, Any]:
    """Whether ``values`` (a step's summary, before the server records it) carries a secret this
    browser holds, in any form ``taint.check_arguments`` knows: the server withholds such a
    summary whole, so no record or event holds a right guess (executor/taint.py). No lease."""
    return {"carries_secret": taint.supplies_secret(args.values)}


@takes(ops.NoArgs)
async def op_tabs(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    """The open pages (id, title, url, active), read without a lease or a grant."""
    return {"tabs": await ex.pages.tabs_describe()}


@takes(ops.NoArgs)
async def op_dialogs(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    """The dialogs waiting for an answer, read without a lease or a grant."""
    return {"dialogs": ex.pages.dialogs.describe()}


@takes(ops.SubscribeArgs)
async def op_subscribe(ex: Executor, peer: Peer | None, args: ops.SubscribeArgs) -> dict[str, Any]:
    if peer is None:
        raise ControlError("Only a connection subscribes to frames.", "bad_request")
    await ex.feed.subscribe(peer, args.max_fps)
    return {}


@takes(ops.NoArgs)
async def op_unsubscribe(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    if peer is not None:
        await ex.feed.unsubscribe(peer)
    return {}


@takes(ops.NoArgs)
async def op_takeover(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    grant, counters = await ex.control.takeover()
    return {
        "grant_id": grant.id,
        "version": ex.control.version,
        "expires_in": HUMAN_GRANT_SECONDS,
        "stopped_processes": counters.stopped_processes,
        "cancelled_downloads": counters.cancelled_downloads,
        "aborted_exports": counters.aborted_exports,
    }


@takes(ops.GrantArgs)
async def op_grant_renew(ex: Executor, peer: Peer | None, args: ops.GrantArgs) -> dict[str, Any]:
    ex.control.grant_renew(args.grant_id)
    return {"expires_in": HUMAN_GRANT_SECONDS}


@takes(ops.GrantArgs)
async def op_grant_release(ex: Executor, peer: Peer | None, args: ops.GrantArgs) -> dict[str, Any]:
    ex.control.grant_release(args.grant_id)
    return {}


@takes(ops.InputArgs)
async def op_input(ex: Executor, peer: Peer | None, args: ops.InputArgs) -> dict[str, Any]:
    value, grant_id = args.input, args.grant_id
    ex.control.grant_check(grant_id)
    async with ex.input_lock:
        ex.control.grant_check(grant_id)
        # Counted where it acts: the proof's WebSocket fuzz checks that no refused message got here.
        ex.inputs_dispatched += 1
        EXECUTOR_INPUTS.labels(type=value.type).inc()
        if ex.held and ex.held.grant_id != grant_id:
            await actions.release_held(ex.page, ex.held)
        ex.held.grant_id = grant_id
        if isinstance(value, TabInput):
            # Keys and buttons held on one page are released before another page gets the input.
            await actions.release_held(ex.page, ex.held)
            await (ex.pages.tab_switch if value.action == "switch" else ex.pages.tab_close)(value.tab)
        elif isinstance(value, DialogInput):
            if value.credentials() is not None:
                taint.remember_secrets(ex.page, value.credentials() or ())
            await ex.pages.dialog_answer(
                value.dialog, accept=value.accept, text=value.text, credentials=value.credentials()
            )
        elif ex.pages.dialogs.on_page(ex.page) is None:
            typing = isinstance(value, TextInput) or (isinstance(value, KeyInput) and value.phase == "down")
            if typing:
                # A field a person types into is tainted (and masked) before the first key lands,
                # and again after the key, which may have moved focus (executor/taint.py).
                await taint.mark_focused(ex.page)
            # An input that opens a dialog is done once dispatched (its ack does not wait for the answer).
            await ex.pages.unless_dialog(ex.page, actions.human_input(ex.page, value, ex.held))
            if typing:
                # What the person typed is remembered for redaction, as a stored secret is.
                await taint.mark_focused(ex.page, learn=True)
        # Otherwise the page is blocked by its dialog, as in a browser: the input is dropped.
    return {}


@takes(ops.NoArgs)
async def op_lease_acquire(ex: Executor, peer: Peer | None, args: ops.NoArgs) -> dict[str, Any]:
    lease = ex.control.lease_acquire()
    return {"lease_id": lease.id, "expires_in": lease.expires_at - ex.control.clock.monotonic()}


@takes(ops.LeaseArgs)
async def op_lease_renew(ex: Executor, peer: Peer | None, args: ops.LeaseArgs) -> dict[str, Any]:
    lease = ex.control.lease_renew(args.lease_id)
    return {"expires_in": lease.expires_at - ex.control.clock.monotonic()}


@takes(ops.LeaseArgs)
async def op_lease_release(ex: Executor, peer: Peer | None, args: ops.LeaseArgs) -> dict[str, Any]:
    ex.control.lease_release(args.lease_id)
    return {}


@takes(ops.AgentArgs)
async def op_agent(ex: Executor, peer: Peer | None, args: ops.AgentArgs) -> dict[str, Any]:
    action = actions.AGENT_ACTIONS.get(args.action)
    if action is None:
        raise ControlError(f"Unknown agent action {args.action[:40]!r}.", "bad_request")
    # Validated before anything runs: a refused argument never reaches the page.
    call = action.bind(args.args, args.context)
    # Nothing the agent supplies may carry a secret the browser holds: the answer (redacted)
    # would tell a right guess from a wrong one (executor/taint.py).
    taint.check_arguments(args.args)
    lease_id = args.lease_id
    ex.control.lease_check(lease_id)
    page = ex.page
    # The reply leaves time to answer within the action's limit.
    deadline = asyncio.get_running_loop().time() + action.timeout_seconds() - 2
    ex.pages.refuse_if_blocked(page, beside_dialog=action.beside_dialog)

    act = actions.ActionContext(
        page=page, computer_id=ex.computer_id, server=ex.server, browser=ex.pages, backend=ex.backend
    )

    async def run() -> dict[str, Any]:
        async with ex.input_lock:
            ex.control.lease_check(lease_id)
            await ex.settle_held_locked()
            if action.beside_dialog:
                result = await call(act)
            else:
                # A dialog may have opened while the lock was awaited.
                ex.pages.refuse_if_blocked(page, beside_dialog=action.beside_dialog)
                done = await ex.pages.unless_dialog(page, call(act))
                if isinstance(done, Pending):
                    # The action's effect happened and the page opened a dialog: the agent is told.
                    result = {"url": page.url, "dialog_opened": done.describe()}
                else:
                    result = dict(done)
            if ex.downloads.pending() or action.name in DOWNLOADING:
                downloads = await ex.downloads.report(deadline)
                if downloads:
                    result = {**result, "downloads": downloads}
            return result

    task = asyncio.create_task(run())
    ex.control.track_agent_task(task, export=action.export)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():
            raise ControlError(
                "A human has control of this computer; the agent's action was stopped.", "human_control"
            ) from None
        task.cancel()
        raise


@takes(ops.RecordingStartArgs)
async def op_recording_start(ex: Executor, peer: Peer | None, args: ops.RecordingStartArgs) -> dict[str, Any]:
    plan = recording.Plan(**args.model_dump())
    return {"changed": await ex.recorder.start(plan)}


@takes(ops.RecordingStopArgs)
async def op_recording_stop(ex: Executor, peer: Peer | None, args: ops.RecordingStopArgs) -> dict[str, Any]:
    return {"changed": await ex.recorder.stop(args.recording_id)}


OpHandler = Callable[[Any, Peer | None, Any], Awaitable[dict[str, Any]]]
# The handler of each operation of executor/ops.py (the registry checks, at import, that none is missing).
OP_HANDLERS: dict[str, OpHandler] = {
    "hello": op_hello,
    "status": op_status,
    "observe": op_observe,
    "arguments_check": op_arguments_check,
    "tabs": op_tabs,
    "dialogs": op_dialogs,
    "subscribe": op_subscribe,
    "unsubscribe": op_unsubscribe,
    "takeover": op_takeover,
    "grant_renew": op_grant_renew,
    "grant_release": op_grant_release,
    "input": op_input,
    "lease_acquire": op_lease_acquire,
    "lease_renew": op_lease_renew,
    "lease_release": op_lease_release,
    "agent": op_agent,
    "recording_start": op_recording_start,
    "recording_stop": op_recording_stop,
}
if (
    set(OP_HANDLERS) != set(ops.OPS)
    or any(getattr(handler, "args_model", None) is not ops.OPS[name].args for name, handler in OP_HANDLERS.items())
    or set(ops.ACTION_REPLIES) != set(actions.AGENT_ACTIONS)
):
    raise RuntimeError("executor/ops.py and the executor's handlers (or agent actions) disagree")
