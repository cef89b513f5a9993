"""Refusals, sequence rules and session endings of the gateway, each against a
real uvicorn, executor and Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from accounts.models import ApiKey
from accounts.services import api_key_revoke
from computers.models import Computer
from core.clock import ManualClock
from executor.control import HUMAN_GRANT_SECONDS
from executor.runtime import Executor
from tests.support.screen import (
    LOCAL_AND_CDP,
    create_session,
    db,
    executor_on,
    on_executor,
    open_socket,
    recv_type,
    recv_until_closed,
    register,
    running_executor,
    send_input,
    take_control,
    ws_url,
)
from tests.support.tiers import live
from tests.support.waits import eventually_async
from visual import limits
from visual.consumers import VisualStreamConsumer
from visual.models import VisualSession, VisualTicket


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
def backend(request: pytest.FixtureRequest) -> str:
    """The control state machine's rules hold on the executor's own Chromium and on one reached over CDP."""
    return str(request.param)


@pytest.fixture(scope="module")
@live
def executor(backend: str) -> Iterator[Executor]:
    yield from executor_on(backend)


def _errors(messages: list[Any]) -> list[dict[str, Any]]:
    return [m for m in messages if isinstance(m, dict) and m.get("type") == "error"]


async def _ended_with_error(ws: Any) -> dict[str, Any]:
    messages = await recv_until_closed(ws)
    errors = _errors(messages)
    assert len(errors) == 1, messages[-3:]
    assert set(errors[0]) == {"type", "message"} and errors[0]["message"]
    return errors[0]


# --- handshake -------------------------------------------------------------


async def _session(live_origin: str, key: str, mode: str = "observe") -> dict[str, Any]:
    response = await create_session(live_origin, key, "pc-1", mode)
    assert response.status_code == 201, response.text
    return response.json()


def _protocols(session: dict[str, Any]) -> list[str]:
    return [session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]]


async def test_a_ticket_opens_one_socket_and_its_reuse_gets_http_401(screen: Any, live_origin: str, runner_key: str) -> None:
    session = await _session(live_origin, runner_key)
    ws = await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
    with pytest.raises(InvalidStatus) as refused:
        await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
    assert refused.value.response.status_code == 401
    assert "error" in json.loads(refused.value.response.body or b"{}")
    await ws.close()


async def test_an_expired_ticket_gets_http_401_and_opens_nothing(screen: Any, live_origin: str, runner_key: str) -> None:
    session = await _session(live_origin, runner_key)
    await db(
        lambda: VisualTicket.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    )
    with pytest.raises(InvalidStatus) as refused:
        await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
    assert refused.value.response.status_code == 401
    connected = await db(lambda: VisualSession.objects.filter(connected_at__isnull=False).count())
    assert connected == 0


async def test_a_handshake_without_a_valid_ticket_gets_http_401(
    screen: Any, live_origin: str, runner_key: str, caplog: Any
) -> None:
    session = await _session(live_origin, runner_key)
    caplog.set_level(logging.DEBUG)
    for protocols in (
        [],
        ["ram-jpeg-v1"],
        ["ram-jpeg-v1", "ram-ticket.short"],
        ["ram-jpeg-v1", "ram-ticket." + "A" * 43],
    ):
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(live_origin), subprotocols=protocols or None)  # type: ignore[arg-type]
        assert refused.value.response.status_code == 401, protocols
    # None of these carried the real ticket: it still opens its one socket.
    ws = await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
    assert json.loads(await ws.recv())["type"] == "hello"
    await ws.close()


def _refused_attempts(session: dict[str, Any], other: dict[str, Any]) -> list[tuple[list[str], str | None]]:
    ticket = session["ticket_protocol_prefix"] + session["ticket"]
    return [
        ([ticket], None),  # without ram-jpeg-v1
        (["ram-jpeg-v2", ticket], None),  # wrong subprotocol
        (["ram-jpeg-v1", ticket, "ram-ticket." + "A" * 43], None),  # a second ticket beside it
        (["ram-jpeg-v1", ticket, other["ticket_protocol_prefix"] + other["ticket"]], None),  # two real tickets
        (["ram-jpeg-v1", ticket], "https://evil.example"),  # foreign Origin
        (["ram-jpeg-v1", ticket], "null"),  # opaque Origin
    ]


async def test_a_refused_handshake_consumes_the_ticket_it_offered(
    screen: Any, live_origin: str, runner_key: str, caplog: Any
) -> None:
    """One connection attempt per ticket: after any refused handshake the ticket opens nothing."""
    caplog.set_level(logging.DEBUG)
    for number in range(6):
        session, other = await _session(live_origin, runner_key), await _session(live_origin, runner_key)
        protocols, origin = _refused_attempts(session, other)[number]
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(live_origin), subprotocols=protocols, origin=origin)  # type: ignore[arg-type]
        assert refused.value.response.status_code == 401, number
        with pytest.raises(InvalidStatus) as again:
            await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
        assert again.value.response.status_code == 401, number
        assert session["ticket"] not in caplog.text
        ended = await db(lambda s=session["session_id"]: VisualSession.objects.get(pk=s))
        assert ended.ended_at is not None and ended.connected_at is None, number
        if number == 3:  # both tickets offered in that attempt are used up
            with pytest.raises(InvalidStatus):
                await connect(ws_url(live_origin), subprotocols=_protocols(other))  # type: ignore[arg-type]
        else:  # a ticket not offered is untouched
            ws = await connect(ws_url(live_origin), subprotocols=_protocols(other))  # type: ignore[arg-type]
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.close()
            for _ in range(50):
                if not await db(lambda: VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).exists()):
                    break
                await asyncio.sleep(0.05)


def _misplaced(session: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(path and query after the stream URL, subprotocols): the ticket somewhere it must not be."""
    ticket = session["ticket"]
    protocol = session["ticket_protocol_prefix"] + ticket
    return [
        (f"?ticket={ticket}", [session["subprotocol"]]),  # in the query string
        (f"?ticket={ticket}", _protocols(session)),  # in the query string and where it belongs
        (f"?t=x&next={protocol.replace('.', '%2E')}", [session["subprotocol"]]),  # percent-encoded, inside a value
        (f"/{ticket}", _protocols(session)),  # in the path (a path no route has)
        ("", [session["subprotocol"], ticket]),  # a subprotocol without its prefix
    ]


async def test_a_ticket_sent_in_the_url_or_out_of_place_is_refused_and_used_up(
    screen: Any, live_origin: str, runner_key: str, caplog: Any
) -> None:
    """A ticket anywhere but its own subprotocol may have reached a log, a proxy or a history: the
    handshake is refused and the ticket opens nothing afterwards, even sent properly."""
    caplog.set_level(logging.DEBUG)
    for number in range(5):
        session, other = await _session(live_origin, runner_key), await _session(live_origin, runner_key)
        tail, protocols = _misplaced(session)[number]
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(live_origin) + tail, subprotocols=protocols)  # type: ignore[arg-type]
        assert refused.value.response.status_code in (401, 404), number
        with pytest.raises(InvalidStatus) as again:
            await connect(ws_url(live_origin), subprotocols=_protocols(session))  # type: ignore[arg-type]
        assert again.value.response.status_code == 401, number
        ended = await db(lambda s=session["session_id"]: VisualSession.objects.get(pk=s))
        assert ended.ended_at is not None and ended.connected_at is None, number
        assert session["ticket"] not in caplog.text
        # A query string without a ticket refuses nothing by itself; the other ticket still opens.
        ws = await connect(ws_url(live_origin) + "?v=1", subprotocols=_protocols(other))  # type: ignore[arg-type]
        assert json.loads(await ws.recv())["type"] == "hello"
        await ws.close()
        for _ in range(50):
            if not await db(lambda: VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).exists()):
                break
            await asyncio.sleep(0.05)


async def test_a_browser_handshake_from_another_origin_gets_http_401(screen: Any, live_origin: str, runner_key: str) -> None:
    session = await _session(live_origin, runner_key)
    with pytest.raises(InvalidStatus) as refused:
        await connect(ws_url(live_origin), subprotocols=_protocols(session), origin="https://evil.example")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 401


# --- observe and control ---------------------------------------------------------


async def test_an_observe_session_cannot_send_input(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    await ws.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "text", "text": "x"}}))
    await _ended_with_error(ws)


async def test_input_before_takeover_ends_the_session(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await recv_type(ws, "frame")
    await ws.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "text", "text": "x"}}))
    error = await _ended_with_error(ws)
    # The gateway refuses it itself: the executor never sees it (its own refusal reads "grant expired").
    assert error["message"].startswith("No human grant on this socket")
    assert screen.control.state == "available"


INVALID = [
    "not json",
    json.dumps([{"type": "takeover"}]),
    json.dumps({"type": "click", "x": 1, "y": 1}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "text", "text": "x"}, "computer_id": "pc-1"}),
    json.dumps({"type": "input", "sequence": 0, "input": {"type": "text", "text": "x"}}),
    json.dumps({"type": "input", "sequence": 9007199254740992, "input": {"type": "text", "text": "x"}}),
    json.dumps({"type": "input", "sequence": 2.5, "input": {"type": "text", "text": "x"}}),
    json.dumps({"type": "input", "sequence": "2", "input": {"type": "text", "text": "x"}}),
    json.dumps({"type": "input", "sequence": True, "input": {"type": "text", "text": "x"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "scroll", "delta_y": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "click", "x": 1, "y": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": 1280, "y": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": -1, "y": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": 1, "y": 720}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": "1", "y": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": 1, "y": 1, "button": "back"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "pointer", "phase": "down", "x": 1, "y": 1, "extra": 1}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "text", "text": "a" * 4001}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "text", "text": "😀" * 2001}}, ensure_ascii=False),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "text", "text": 5}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "key", "phase": "down", "key": "Control+A"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "key", "phase": "down", "key": "F13"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "key", "phase": "press", "key": "a"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "key", "phase": "down", "key": ""}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "wheel", "delta_x": 0, "delta_y": 2001}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "wheel", "delta_y": 10}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "navigate", "url": "ftp://example.com/"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "navigate", "url": "https://user:pw@example.com/"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "navigate", "url": "/relative"}}),
    json.dumps({"type": "input", "sequence": 2, "input": {"type": "navigate", "url": "https://example.com/" + "a" * 4096}}),
    json.dumps({"type": "input", "sequence": 1, "input": {"type": "text", "text": "repeated"}}),
    json.dumps({"type": "takeover"}),
    json.dumps({"type": "takeover", "force": True}),
    json.dumps({"type": "release", "sequence": 3}),
]


async def test_each_invalid_message_under_control_ends_the_session(screen: Any, live_origin: str, runner_key: str) -> None:
    # One server for all the variants: each gets its own session, grant and socket.
    for number, message in enumerate(INVALID):
        # The test's executor sends no heartbeat of its own: on a slow machine the variants together
        # outlast the 30 s freshness window, so each one renews the registration as a live executor would.
        await db(lambda: register(screen))
        ws = await open_socket(live_origin, runner_key, "pc-1", "control")
        await take_control(ws)
        dispatched = screen.inputs_dispatched
        assert await send_input(ws, 1, {"type": "pointer", "phase": "move", "x": 1, "y": 1}) == {"type": "ack", "sequence": 1}
        await ws.send(message)
        error = await _ended_with_error(ws)
        assert "repeated" not in error["message"] and "pw" not in error["message"], number
        # Counted at the executor: the acknowledged input reached the browser, the invalid one never did.
        assert screen.inputs_dispatched == dispatched + 1, number
        # The grant ended with the socket: the person's control is released.
        for _ in range(50):
            if screen.control.state != "human":
                break
            await asyncio.sleep(0.1)
        assert screen.control.state == "released", number
        for _ in range(50):  # the socket's session has ended before the next one opens
            if not await db(lambda: VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).exists()):
                break
            await asyncio.sleep(0.05)


async def test_a_lower_sequence_ends_the_session_and_is_not_executed(screen: Any, live_origin: str, runner_key: str) -> None:
    on_executor(screen, lambda: screen.page.set_content("<input id=t autofocus>"))
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    assert await send_input(ws, 5, {"type": "text", "text": "a"}) == {"type": "ack", "sequence": 5}
    await ws.send(json.dumps({"type": "input", "sequence": 4, "input": {"type": "text", "text": "b"}}))
    await _ended_with_error(ws)
    assert on_executor(screen, lambda: screen.page.evaluate("document.getElementById('t').value")) == "a"


async def test_release_then_input_ends_the_session(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.send(json.dumps({"type": "release"}))
    assert (await recv_type(ws, "state"))["control"] == "released"
    await ws.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "text", "text": "x"}}))
    await _ended_with_error(ws)


async def test_a_second_socket_cannot_take_control_while_a_person_holds_it(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    first = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(first)
    second = await open_socket(live_origin, runner_key, "pc-1", "control")
    frame = await recv_type(second, "frame")
    assert frame["control"] == "human" and frame["controlling"] is False
    await second.send(json.dumps({"type": "takeover"}))
    await _ended_with_error(second)
    assert await send_input(first, 1, {"type": "pointer", "phase": "move", "x": 5, "y": 5}) == {"type": "ack", "sequence": 1}
    await first.close()


async def test_the_grant_is_renewed_while_the_socket_lives(
    screen: Any, live_origin: str, runner_key: str, monkeypatch: Any
) -> None:
    clock = ManualClock()
    monkeypatch.setattr(screen.control, "clock", clock)
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    granted_until = screen.control.grant.expires_at
    # Most of the grant passes: only the gateway's renewal (every 2 s) keeps it alive.
    clock.advance(HUMAN_GRANT_SECONDS - 1)
    await eventually_async(lambda: screen.control.grant is not None and screen.control.grant.expires_at > granted_until)
    clock.advance(HUMAN_GRANT_SECONDS - 1)  # beyond the first grant, within the renewed one
    assert await send_input(ws, 1, {"type": "pointer", "phase": "move", "x": 9, "y": 9}) == {"type": "ack", "sequence": 1}
    assert screen.control.state == "human"
    await ws.close()


async def test_the_grant_expires_when_renewal_stops_and_the_session_ends(
    screen: Any, live_origin: str, runner_key: str, monkeypatch: Any
) -> None:
    clock = ManualClock()
    monkeypatch.setattr(screen.control, "clock", clock)
    monkeypatch.setattr("visual.limits.CYCLE_SECONDS", 60.0)  # the gateway's renewal cycle stalls
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    clock.advance(HUMAN_GRANT_SECONDS)
    error = await _ended_with_error(ws)
    assert "control" in error["message"].lower()
    assert screen.control.state == "released"


# --- endings -----------------------------------------------------------------


async def test_a_generation_change_ends_the_session(screen: Any, live_origin: str, runner_key: str, backend: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    restart = running_executor(backend)
    restarted = await asyncio.to_thread(restart.__enter__)
    try:
        await db(
            lambda: Computer.objects.filter(pk="pc-1").update(
                generation=restarted.generation, executor_address=restarted.address
            )
        )
        error = await _ended_with_error(ws)
        assert error["message"] == "Computer restarted; reconnect."
    finally:
        await asyncio.to_thread(restart.__exit__, None, None, None)


async def test_revoking_the_key_ends_its_sessions(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    await db(lambda: api_key_revoke(key=ApiKey.objects.get(kind="runner")))
    error = await _ended_with_error(ws)
    assert "revoked" in error["message"]


async def test_reassigning_the_computer_ends_the_session(
    screen: Any, live_origin: str, runner_key: str, make_account: Any
) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    other = await db(lambda: make_account("Other"))
    await db(lambda: Computer.objects.filter(pk="pc-1").update(account=other))
    error = await _ended_with_error(ws)
    assert "no longer assigned" in error["message"]


async def test_the_session_ends_at_its_time_limit(
    screen: Any, live_origin: str, runner_key: str, monkeypatch: Any
) -> None:
    clock = ManualClock()
    monkeypatch.setattr(VisualStreamConsumer, "clock", clock)
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    clock.advance(limits.SESSION_SECONDS)  # the real 900 s, ended within one 2 s cycle
    error = await _ended_with_error(ws)
    assert "limit" in error["message"]


async def test_a_browser_failure_reports_unavailable_and_ends_the_sessions(
    screen: Any, live_origin: str, runner_key: str, backend: str
) -> None:
    # A dedicated executor: its browser is crashed on purpose and the process ends (a restart is a new generation).
    running = running_executor(backend)
    failing = await asyncio.to_thread(running.__enter__)
    try:
        await db(
            lambda: Computer.objects.filter(pk="pc-1").update(
                generation=failing.generation, executor_address=failing.address
            )
        )
        observer = await open_socket(live_origin, runner_key, "pc-1", "observe")
        person = await open_socket(live_origin, runner_key, "pc-1", "control")
        await recv_type(observer, "frame")
        await take_control(person)
        async def crash() -> None:
            with contextlib.suppress(Exception):  # the crashed target cannot answer
                await failing.feed.cdp.send("Page.crash")

        on_executor(failing, crash)
        for ws in (observer, person):
            messages = await recv_until_closed(ws)
            states = [m for m in messages if isinstance(m, dict) and m.get("type") == "state"]
            assert {"type": "state", "control": "unavailable", "controlling": False} in states
            assert len(_errors(messages)) == 1
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)
