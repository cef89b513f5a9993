"""The faults (issue 21, items 1–6), each repeated at random points, each returning its table rows.

Every fault is injected into the proof's own processes (proof/stack.py) and undone as a supervisor
would: a killed worker or executor is started again, Redis, PostgreSQL and OpenBao come back on
their ports. What each row counts:

- *held*: tries in which every promise of that row was kept;
- *lost*: tries that left something behind (a run stuck, a socket never ended, a request that
  never answered, a refusal that was not the documented one);
- *duplicated*: tries in which a side effect or a step happened twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from proof.core import Profile, Row
from proof.stack import STEP_MAX_SECONDS, ProofStack, wait_until

# The sweep (beat, every 30 s) finds a run whose step outlived RAM_STEP_MAX_SECONDS.
SWEEP_SECONDS = 30
RECOVERY_SECONDS = STEP_MAX_SECONDS + SWEEP_SECONDS + 60
# No request of the load may take longer than this, database down or not.
REQUEST_BOUND_SECONDS = 10.0
# After PostgreSQL is back, everything answers within this.
DATABASE_RECOVERY_SECONDS = 10.0
# What polling GET /api/computers adds to the measured time (its interval and the answer's time).
POLL_SLACK_SECONDS = 1.5
SETTLED = ("waiting_for_input", "succeeded", "failed", "cancelled", "continued")


class ProofError(Exception):
    """Something the experiment needs did not happen (the try counts as lost)."""


# --- runs ---------------------------------------------------------------------------------------


def run_create(stack: ProofStack, computer_id: str, steps: list[dict[str, Any]], max_model_calls: int = 20) -> str:
    body = {"task": {"goal": "proof", "steps": steps}, "computer_id": computer_id, "max_model_calls": max_model_calls}
    answer = stack.api("POST", "/api/runs", json=body)
    if answer.status_code != 201:
        raise ProofError(f"POST /api/runs answered {answer.status_code}: {answer.text[:200]}")
    return str(answer.json()["id"])


def run_row(run_id: str) -> dict[str, Any]:
    from django.db import close_old_connections

    from runs.models import Run

    close_old_connections()
    row = Run.objects.filter(pk=run_id).values("status", "pause_kind").first()
    if row is None:
        raise ProofError(f"run {run_id} vanished")
    return dict(row)


def run_steps(run_id: str) -> list[dict[str, Any]]:
    from runs.models import RunStep

    steps = RunStep.objects.filter(run_id=run_id).order_by("index").values("index", "tool", "state", "result")
    return [dict(step) for step in steps]


def wait_settled(run_id: str, seconds: float) -> dict[str, Any] | None:
    """The run once it is no longer queued or running, or None (stuck) after ``seconds``."""
    try:
        return wait_until(lambda: (row := run_row(run_id))["status"] in SETTLED and row, seconds, 0.5, "run settled")
    except TimeoutError:
        return None


def run_cancel(stack: ProofStack, run_id: str) -> None:
    """A run paused at a takeover holds its computer: the proof lets go of it after looking."""
    with contextlib.suppress(requests.RequestException):
        stack.api("POST", f"/api/runs/{run_id}/cancel", timeout=30)


def computer_generation(computer_id: str) -> str:
    from django.db import close_old_connections

    from computers.models import Computer

    close_old_connections()
    return str(Computer.objects.values_list("generation", flat=True).get(pk=computer_id))


def executor_address(computer_id: str) -> str:
    from computers.models import Computer

    return str(Computer.objects.values_list("executor_address", flat=True).get(pk=computer_id))


def effect_steps(stack: ProofStack, effect_id: str, hold_ms: int) -> list[dict[str, Any]]:
    return [
        {"tool": "navigate", "arguments": {"url": stack.portal.effect_url(effect_id, hold_ms)}},
        {"tool": "extract_text", "arguments": {}},
    ]


def start_effect_run(stack: ProofStack, computer_id: str, effect_id: str, hold_ms: int) -> str:
    """A run whose first step is a counted side effect, once its request reached the portal.

    A run that ends without reaching it (its computer still held by the previous try's lease) is
    cancelled and made again, a few times."""
    for _ in range(4):
        run_id = run_create(stack, computer_id, effect_steps(stack, effect_id, hold_ms))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if stack.portal.count(effect_id) >= 1:
                return run_id
            if run_row(run_id)["status"] in SETTLED:
                break
            time.sleep(0.05)
        run_cancel(stack, run_id)
        time.sleep(5)
    raise ProofError(f"no run on {computer_id} reached the side effect")


@dataclass
class Tally:
    """Per-try outcomes of one row."""

    tries: int = 0
    held: int = 0
    lost: int = 0
    duplicated: int = 0
    notes: list[str] = field(default_factory=list)
    figures: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *, held: bool, lost: bool = False, duplicated: bool = False, note: str = "") -> None:
        with self.lock:
            self.tries += 1
            self.held += int(held)
            self.lost += int(lost)
            self.duplicated += int(duplicated)
            if note:
                self.notes.append(note)

    def row(self, experiment: str, figure: str) -> Row:
        if self.notes:
            figure += "; " + "; ".join(sorted(set(self.notes))[:3])
        return Row(experiment, self.tries, self.held, self.lost, self.duplicated, figure)


def spread(values: list[float], unit: str = "s") -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):.1f} {unit} (max {max(values):.1f})"


# --- 1. worker SIGKILL mid-step --------------------------------------------------------------------


def worker_kill(stack: ProofStack, profile: Profile) -> list[Row]:
    """A Celery worker SIGKILLed (its whole pool) while a step's side effect is in flight."""
    tally = Tally()
    outcomes: dict[str, int] = {}
    kill_lock = threading.Lock()
    aimed = [0]

    def one(n: int, computer_id: str) -> None:
        effect = f"wk{n}-{secrets.token_hex(4)}"
        run_id = start_effect_run(stack, computer_id, effect, hold_ms=3000)
        time.sleep(random.uniform(0, 2.5))  # noqa: S311 - a random point of the step, not a secret
        with kill_lock:
            victim = stack.worker_holding(executor_address(computer_id))
            if victim is not None:
                aimed[0] += 1
            else:
                victim = random.choice(stack.workers)  # noqa: S311
            killed_at = time.monotonic()
            victim.kill(signal.SIGKILL)  # the proof's supervisor starts it again (stack.supervise)
        settled = wait_settled(run_id, RECOVERY_SECONDS)
        count = stack.portal.count(effect)
        if settled is None:
            tally.add(held=False, lost=True, duplicated=count > 1, note=f"a run still {run_row(run_id)['status']}")
            return
        tally.figures.append(time.monotonic() - killed_at)
        outcome = settled["status"] + (f" ({settled['pause_kind']})" if settled["pause_kind"] else "")
        with tally.lock:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        tally.add(held=count == 1, duplicated=count > 1)
        if settled["status"] == "waiting_for_input":
            run_cancel(stack, run_id)

    _per_computer(stack, profile.repetitions, one)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items()))
    figure = (
        f"side effects counted once; runs ended or paused: {summary}; "
        f"{aimed[0]} kills hit the worker holding the step; settled {spread(tally.figures)} after the kill"
    )
    return [tally.row("worker SIGKILL mid-step", figure)]


def _per_computer(stack: ProofStack, repetitions: int, one: Callable[[int, str], None]) -> None:
    """``repetitions`` tries split between the two computers, each computer's in turn."""
    errors: list[BaseException] = []

    def serve(computer_id: str, numbers: list[int]) -> None:
        try:
            for n in numbers:
                one(n, computer_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
        finally:
            from django.db import connection

            connection.close()

    threads = [
        threading.Thread(target=serve, args=(computer_id, list(range(i, repetitions, len(stack.computers)))))
        for i, computer_id in enumerate(stack.computers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


# --- 2. executor SIGKILL mid-session ---------------------------------------------------------------


async def open_viewer(stack: ProofStack, computer_id: str) -> tuple[Any, dict[str, Any]]:
    """A real jpeg-websocket-v1 observer: the session, the socket, its hello and first frame."""
    from websockets.asyncio.client import connect

    origin = stack.next_url()
    body = {"computer_id": computer_id, "mode": "observe", "transport": "jpeg-websocket-v1"}
    headers = {
        "Authorization": f"Bearer {stack.runner_key}",
        "Content-Type": "application/json",
        "X-RAM-Intent": "visual-session",
    }
    for _ in range(20):
        answer = await asyncio.to_thread(
            requests.post, f"{origin}/api/visual/sessions", data=json.dumps(body), headers=headers, timeout=30
        )
        if answer.status_code != 429:
            break
        await asyncio.sleep(1)  # the previous socket's end is still being recorded
    if answer.status_code != 201:
        raise ProofError(f"POST /api/visual/sessions answered {answer.status_code}: {answer.text[:200]}")
    session = answer.json()
    stack.plant(session["ticket"])
    ws = await connect(
        origin.replace("http://", "ws://") + "/api/visual/stream",
        subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
        open_timeout=20,
        proxy=None,
    )
    async with asyncio.timeout(30):
        hello = json.loads(await ws.recv())
        if hello.get("type") != "hello":
            raise ProofError(f"the first message was not hello: {hello.get('type')}")
        while True:
            message = await ws.recv()
            if isinstance(message, str) and json.loads(message).get("type") == "frame":
                return ws, json.loads(message)


async def ended(ws: Any, seconds: float) -> tuple[bool, int | None, list[str]]:
    """Read until the server ends the socket: (ended, close code seen, texts of error messages)."""
    from websockets.exceptions import ConnectionClosed

    errors: list[str] = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await ws.recv()
                if isinstance(message, str):
                    data = json.loads(message)
                    if data.get("type") == "error":
                        errors.append(str(data.get("message")))
    except ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd is not None else 1006
        return True, code, errors
    except TimeoutError:
        return False, None, errors
    return False, None, errors


def executor_kill(stack: ProofStack, profile: Profile) -> list[Row]:
    """An executor (and its Chromium) SIGKILLed with a viewer watching and a step in flight."""
    from django.conf import settings

    stale_bound = float(settings.RAM_EXECUTOR_STALE_SECONDS)
    sessions, unavailable, steps = Tally(), Tally(), Tally()
    close_codes: dict[int, int] = {}
    restarts: list[float] = []
    for n in range(profile.repetitions):
        computer_id = stack.computers[n % len(stack.computers)]
        asyncio.run(_executor_kill_once(stack, n, computer_id, stale_bound, sessions, unavailable, steps, close_codes, restarts))
    codes = ", ".join(f"{code} ×{count}" for code, count in sorted(close_codes.items()))
    return [
        sessions.row(
            "executor SIGKILL: viewers",
            f"every viewer ended (close {codes}, no Close frame: the spec's terminate) and reconnected to the new generation",
        ),
        unavailable.row(
            "executor SIGKILL: reads unavailable",
            f"GET /api/computers said unavailable {spread(unavailable.figures)} after the kill "
            f"(bound: two heartbeats, {stale_bound:.0f} s); ready again {spread(restarts)} after the restart",
        ),
        steps.row("executor SIGKILL: step in flight", "the step became uncertain, its side effect counted once, never replayed"),
    ]


async def _executor_kill_once(
    stack: ProofStack,
    n: int,
    computer_id: str,
    stale_bound: float,
    sessions: Tally,
    unavailable: Tally,
    steps: Tally,
    close_codes: dict[int, int],
    restarts: list[float],
) -> None:
    old = await asyncio.to_thread(computer_generation, computer_id)
    ws, frame = await open_viewer(stack, computer_id)
    effect = f"ek{n}-{secrets.token_hex(4)}"
    run_id = await asyncio.to_thread(start_effect_run, stack, computer_id, effect, 4000)
    await asyncio.sleep(random.uniform(0, 2))  # noqa: S311
    executor = stack.executors[computer_id]
    killed_at = time.monotonic()
    executor.kill(signal.SIGKILL)
    closed, code, _ = await ended(ws, 20)
    if code is not None:
        close_codes[code] = close_codes.get(code, 0) + 1

    # How long until the API says so (a supervisor would restart it meanwhile; this one waits).
    def gone() -> bool:
        return stack.computer_available(computer_id) is False

    try:
        await asyncio.to_thread(wait_until, gone, 60, 0.2, "unavailable")
        seen = time.monotonic() - killed_at
        unavailable.figures.append(seen)
        # The bound, plus what polling adds (one 0.2 s interval and the answer's own time).
        within = seen <= stale_bound + POLL_SLACK_SECONDS
        unavailable.add(held=within, note="" if within else f"one took {seen:.1f} s")
    except TimeoutError:
        unavailable.add(held=False, lost=True, note="still available 60 s after the kill")
    restarted_at = time.monotonic()
    executor.start()
    new = old
    try:
        await asyncio.to_thread(stack.wait_computer_ready, computer_id, 120)
        new = await asyncio.to_thread(computer_generation, computer_id)
        restarts.append(time.monotonic() - restarted_at)
    except TimeoutError:
        pass
    reconnected = False
    with contextlib.suppress(Exception):
        ws2, frame2 = await open_viewer(stack, computer_id)
        reconnected = frame2["generation"] == new != old and frame["generation"] == old
        await ws2.close()
    sessions.add(held=closed and reconnected, lost=not closed, note="" if reconnected else "a reconnect failed")
    settled = await asyncio.to_thread(wait_settled, run_id, RECOVERY_SECONDS)
    count = stack.portal.count(effect)
    navigate = [s for s in await asyncio.to_thread(run_steps, run_id) if s["tool"] == "navigate"]
    uncertain = len(navigate) == 1 and navigate[0]["state"] == "uncertain"
    steps.add(
        held=settled is not None and uncertain and count == 1,
        lost=settled is None,
        duplicated=count > 1 or len(navigate) > 1,
        note="" if uncertain else f"the step ended {[s['state'] for s in navigate]}",
    )
    if settled is not None and settled["status"] == "waiting_for_input":
        await asyncio.to_thread(run_cancel, stack, run_id)


# --- 3. Redis restart -------------------------------------------------------------------------------------


def redis_restart(stack: ProofStack, profile: Profile) -> list[Row]:
    """Redis (broker and channel layer, no persistence) killed and started empty during runs and screens."""
    runs, sockets = Tally(), Tally()
    outcomes: dict[str, int] = {}
    before = sum(n for name, n in stack.restarts.items() if name.startswith("worker"))
    for n in range(profile.repetitions):
        asyncio.run(_redis_once(stack, n, runs, sockets, outcomes))
    summary = ", ".join(f"{v} {k}" for k, v in sorted(outcomes.items()))
    restarted = sum(n for name, n in stack.restarts.items() if name.startswith("worker")) - before
    return [
        runs.row(
            "Redis restart: runs",
            f"runs resumed through the database sweep, each step once: {summary}; settled {spread(runs.figures)} "
            f"after the restart (workers exited on the lost broker and were started again {restarted} times)",
        ),
        sockets.row("Redis restart: screen sockets", "each socket went on or ended cleanly; a new one after the restart got hello and frames"),
    ]


async def _redis_once(stack: ProofStack, n: int, runs: Tally, sockets: Tally, outcomes: dict[str, int]) -> None:
    viewers = [await open_viewer(stack, computer_id) for computer_id in stack.computers]
    effects: dict[str, list[str]] = {}
    run_ids: list[str] = []
    for computer_id in stack.computers:
        ids = [f"rr{n}-{computer_id[-1]}-{i}-{secrets.token_hex(3)}" for i in range(3)]
        steps = [{"tool": "navigate", "arguments": {"url": stack.portal.effect_url(e, 700)}} for e in ids]
        run_id = await asyncio.to_thread(run_create, stack, computer_id, [*steps, {"tool": "extract_text", "arguments": {}}])
        effects[run_id] = ids
        run_ids.append(run_id)
    await asyncio.sleep(random.uniform(0.5, 3.0))  # noqa: S311
    if stack.redis is None:
        raise ProofError("the proof's Redis is not running")
    stack.redis.kill(signal.SIGKILL)
    await asyncio.sleep(1.0)
    await asyncio.to_thread(stack.redis_start)
    restarted = time.monotonic()
    for run_id in run_ids:
        settled = await asyncio.to_thread(wait_settled, run_id, RECOVERY_SECONDS + 30)
        counts = [stack.portal.count(e) for e in effects[run_id]]
        steps = await asyncio.to_thread(run_steps, run_id)
        navigations = [s for s in steps if s["tool"] == "navigate"]
        duplicated = any(c > 1 for c in counts) or len(navigations) > len(effects[run_id])
        if settled is None:
            runs.add(held=False, lost=True, duplicated=duplicated, note="a run stuck after the restart")
            continue
        runs.figures.append(time.monotonic() - restarted)
        outcome = settled["status"] + (f" ({settled['pause_kind']})" if settled["pause_kind"] else "")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        runs.add(held=not duplicated, duplicated=duplicated)
        if settled["status"] == "waiting_for_input":
            await asyncio.to_thread(run_cancel, stack, run_id)
    for computer_id, (ws, _) in zip(stack.computers, viewers, strict=True):
        alive = await _still_framing(ws)
        if not alive:
            closed, _, _ = await ended(ws, 10)
        else:
            closed = True
            await ws.close()
        fresh = False
        with contextlib.suppress(Exception):
            ws2, _ = await open_viewer(stack, computer_id)
            fresh = True
            await ws2.close()
        sockets.add(held=closed and fresh, lost=not closed, note="" if fresh else "a new socket failed after the restart")


async def _still_framing(ws: Any) -> bool:
    """The socket still delivers messages (it survived the restart)."""
    from websockets.exceptions import ConnectionClosed

    try:
        async with asyncio.timeout(5):
            await ws.recv()
        return True
    except (ConnectionClosed, TimeoutError):
        return False


# --- 4. PostgreSQL restart under API load ---------------------------------------------------------------


@dataclass
class Answer:
    at: float
    status: int  # 0: no answer within the bound (or the connection failed)
    json: bool
    retry_after: bool
    seconds: float


def _load(stack: ProofStack, stop: threading.Event, answers: list[Answer], lock: threading.Lock, paths: list[str]) -> None:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {stack.runner_key}"}
    while not stop.is_set():
        path = random.choice(paths)  # noqa: S311
        began = time.monotonic()
        try:
            answer = session.get(stack.next_url() + path, headers=headers, timeout=REQUEST_BOUND_SECONDS)
            kind = answer.headers.get("Content-Type", "")
            try:
                is_json = kind.startswith("application/json") and isinstance(answer.json(), dict)
            except ValueError:
                is_json = False
            got = Answer(began, answer.status_code, is_json, "Retry-After" in answer.headers, time.monotonic() - began)
        except requests.RequestException:
            got = Answer(began, 0, False, False, time.monotonic() - began)
        with lock:
            answers.append(got)
        time.sleep(0.02)


def postgres_restart(stack: ProofStack, profile: Profile) -> list[Row]:
    """PostgreSQL stopped (immediate: a crash) and started again while four clients read the API."""
    tally = Tally()
    recoveries: list[float] = []
    refused_total = 0
    sample = run_create(stack, stack.computers[0], [{"tool": "finish", "arguments": {"output": "ok"}}], 2)
    wait_settled(sample, 60)
    paths = ["/api/runs", "/api/computers", f"/api/runs/{sample}", f"/api/runs/{sample}/steps", f"/api/runs/{sample}/events"]
    for _ in range(profile.repetitions):
        answers: list[Answer] = []
        lock, stop = threading.Lock(), threading.Event()
        clients = [threading.Thread(target=_load, args=(stack, stop, answers, lock, paths)) for _ in range(4)]
        for client in clients:
            client.start()
        time.sleep(2)
        down_at = time.monotonic()
        stack.pg_stop("immediate")
        time.sleep(random.uniform(2, 5))  # noqa: S311
        stack.pg_start()
        up_at = time.monotonic()
        time.sleep(DATABASE_RECOVERY_SECONDS + 5)
        stop.set()
        for client in clients:
            client.join()
        stack.orm_reset()
        bad = [a for a in answers if a.status not in (200, 503) or (a.status == 503 and not (a.json and a.retry_after))]
        slow = [a for a in answers if a.status == 0 or a.seconds > REQUEST_BOUND_SECONDS]
        refused = [a for a in answers if a.status == 503 and a.at >= down_at]
        refused_total += len(refused)
        failing_after = [a.at + a.seconds - up_at for a in answers if a.status != 200 and a.at + a.seconds > up_at]
        recovered = max(failing_after, default=0.0)
        recoveries.append(recovered)
        held = not bad and not slow and recovered <= DATABASE_RECOVERY_SECONDS and bool(refused)
        note = ""
        if bad:
            note = f"{len(bad)} answers not 200 or 503 JSON with Retry-After (e.g. {bad[0].status})"
        elif slow:
            note = f"{len(slow)} requests unanswered within {REQUEST_BOUND_SECONDS:.0f} s"
        elif recovered > DATABASE_RECOVERY_SECONDS:
            note = f"errors until {recovered:.1f} s after the restart"
        elif not refused:
            note = "no request landed while it was down"
        tally.add(held=held, lost=bool(bad or slow), note=note)
    figure = (
        f"while down every answer was 503 JSON with Retry-After ({refused_total} of them), none HTML, none past "
        f"{REQUEST_BOUND_SECONDS:.0f} s; all 200 again {spread(recoveries)} after the restart"
    )
    return [tally.row("PostgreSQL restart under API load", figure)]


# --- 5. OpenBao restart and seal ---------------------------------------------------------------------------


def _vault_ok(stack: ProofStack) -> bool:
    answer = requests.get(f"{stack.web_urls[0]}/readyz", headers={"Authorization": f"Bearer {stack.ops_token}"}, timeout=10)
    return answer.json()["checks"]["vault"]["status"] == "ok"


def _proxy_save(stack: ProofStack, computer_id: str, password: str) -> requests.Response:
    body = {"proxy": {"server": "http://127.0.0.1:9", "username": "proof-proxy", "password": password}}
    return stack.api("PUT", f"/api/computers/{computer_id}/settings", json=body)


def vault_restart_and_seal(stack: ProofStack, profile: Profile) -> list[Row]:
    """OpenBao SIGKILLed and restarted (unsealed again as the embedded default does), then sealed."""
    restart, sealed = Tally(), Tally()
    computer_id = stack.computers[0]
    for n in range(profile.repetitions):
        # Restart: it comes back unsealed, and a credential saved afterwards is stored.
        stack.bao_kill()
        began = time.monotonic()
        stack.bao_start()
        try:
            wait_until(lambda: _vault_ok(stack), 30, 0.2, "vault ready")
            restart.figures.append(time.monotonic() - began)
            password = "Px-" + secrets.token_urlsafe(16)
            stack.plant(password)
            saved = _proxy_save(stack, computer_id, password)
            cleared = stack.api("PUT", f"/api/computers/{computer_id}/settings", json={})
            ok = saved.status_code == 200 and cleared.status_code == 200 and password not in saved.text
            restart.add(held=ok, note="" if ok else f"a save after the restart answered {saved.status_code}")
        except TimeoutError:
            restart.add(held=False, lost=True, note="not ready 30 s after the restart")
        # Sealed: saves and browser_login fail with a clear, coded, secret-free error.
        stack.bao_seal()
        try:
            problems = _sealed_checks(stack, n, computer_id)
        finally:
            stack.bao_unseal()
        wait_until(lambda: _vault_ok(stack), 30, 0.2, "vault unsealed")
        sealed.add(held=not problems, lost=bool(problems), note="; ".join(problems))
    return [
        restart.row("OpenBao SIGKILL and restart", f"unsealed again and serving {spread(restart.figures)} after the restart; a credential save then stored"),
        sealed.row(
            "OpenBao sealed",
            "credential save: 503 JSON naming the vault, nothing changed; browser_login: browser.vault_unavailable, "
            "nothing typed; credential form: the person is told to ask again; no secret in any answer",
        ),
    ]


def _sealed_checks(stack: ProofStack, n: int, computer_id: str) -> list[str]:
    problems: list[str] = []
    password = "Px-" + secrets.token_urlsafe(16)
    stack.plant(password)
    before = stack.api("GET", "/api/computers").json()
    answer = _proxy_save(stack, computer_id, password)
    after = stack.api("GET", "/api/computers").json()
    if answer.status_code != 503 or "vault" not in answer.json().get("error", "").lower() or password in answer.text:
        problems.append(f"a save answered {answer.status_code}")
    if before != after:
        problems.append("a refused save changed the computer")
    # browser_login: a clear code, never "the portal was slow".
    steps = [
        {"tool": "navigate", "arguments": {"url": f"{stack.portal.origin}/login"}},
        {"tool": "browser_login", "arguments": {"credentialId": "proof-portal"}, "on_error": "continue"},
    ]
    run_id = run_create(stack, stack.computers[n % 2], steps)
    settled = wait_settled(run_id, 120)
    login = [s for s in run_steps(run_id) if s["tool"] == "browser_login"]
    result = (login[0]["result"] or {}) if login else {}
    if settled is None or result.get("code") != "browser.vault_unavailable":
        problems.append(f"browser_login answered {result.get('code')!r}")
    if any(secret in json.dumps(result) for secret in stack.planted_secrets):
        problems.append("a secret in browser_login's result")
    if settled is not None and settled["status"] == "waiting_for_input":
        run_cancel(stack, run_id)
    # A credential request's form: no invite can be issued; the person is told to ask again.
    problems += _credential_form_sealed(stack, n)
    return problems


def _credential_form_sealed(stack: ProofStack, n: int) -> list[str]:
    steps = [{"tool": "request_credential", "arguments": {"portal_origin": stack.portal.origin, "label": "Proof portal", "credential_id": f"proof-{n}"}}]
    run_id = run_create(stack, stack.computers[n % 2], steps)
    settled = wait_settled(run_id, 60)
    if settled is None or settled["pause_kind"] != "credential":
        return [f"the credential request ended {settled}"]
    try:
        person = stack.sign_in_person()
        origin = stack.web_urls[0]
        page = person.get(f"{origin}/tasks/{run_id}/intervention", timeout=30)
        opened = person.post(
            f"{origin}/tasks/{run_id}/intervention/open",
            data={"intent": "open", "csrfmiddlewaretoken": person.cookies.get("csrftoken", "")},
            headers={"Origin": origin, "Referer": f"{origin}/tasks/{run_id}/intervention"},
            timeout=30,
            allow_redirects=False,
        )
    finally:
        run_cancel(stack, run_id)
    text = opened.text
    if page.status_code != 200 or opened.status_code != 503 or "vault could not issue the form" not in text.lower():
        return [f"the credential form answered {opened.status_code}"]
    if "#invite=" in text or any(secret in text for secret in stack.planted_secrets):
        return ["an invite or secret on the sealed form's page"]
    return []


# --- 6. disk full under var/ -------------------------------------------------------------------------------


def disk_full(stack: ProofStack, profile: Profile) -> list[Row]:
    """var/artifacts on a small tmpfs (mounted by the proof, as root) filled up, then freed."""
    tally = Tally()
    target = stack.var_dir / "artifacts"
    target.mkdir(exist_ok=True)
    how = _mount_small(target)
    if how is None:
        return [Row("disk full under var/", 1, 0, 0, 0, "could not mount a small tmpfs (the proof must run as root)")]
    pdf = b"%PDF-1.4\n" + secrets.token_bytes(2048) + b"\n%%EOF\n"
    try:
        for n in range(profile.repetitions):
            filler = target / f"filler-{n}"
            _fill(filler)
            refused = _upload(stack, pdf)
            screenshot = _screenshot_run(stack, stack.computers[n % 2])
            filler.unlink()
            stored = _upload(stack, pdf)
            ok_refused = refused.status_code == 503 and "storage is full" in refused.json().get("error", "")
            note = ""
            if not ok_refused:
                note = f"full: upload answered {refused.status_code}"
            elif screenshot:
                note = screenshot
            elif stored.status_code != 201:
                note = f"after space returned: upload answered {stored.status_code}"
            tally.add(held=not note, lost=bool(note), note=note)
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)  # noqa: S603, S607 - the proof's own mount
    return [tally.row("disk full under var/", f"{how}: uploads refused with 503 'storage is full', steps' captures failed cleanly; stored again once space returned")]


def _mount_small(target: Path) -> str | None:
    if shutil.which("mount") is None:
        return None
    argv = ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0711", "tmpfs", str(target)]
    done = subprocess.run(argv, check=False, capture_output=True)  # noqa: S603 - fixed argv, the proof's own directory
    return "a 4 MiB tmpfs at var/artifacts" if done.returncode == 0 else None


def _fill(path: Path) -> None:
    """Write until the file system says it is full (unbuffered: nothing is left to flush)."""
    with open(path, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)


def _upload(stack: ProofStack, data: bytes) -> requests.Response:
    return stack.api(
        "POST", "/api/artifacts?filename=proof.pdf", data=data, headers={"Content-Type": "application/pdf"}
    )


def _screenshot_run(stack: ProofStack, computer_id: str) -> str:
    """A step whose capture cannot be stored fails cleanly (a result, the run not stuck)."""
    steps = [
        {"tool": "navigate", "arguments": {"url": f"{stack.portal.origin}/page/full"}, "on_error": "continue"},
        {"tool": "screenshot", "arguments": {}, "on_error": "continue"},
    ]
    run_id = run_create(stack, computer_id, steps)
    settled = wait_settled(run_id, 90)
    if settled is None:
        return "a run stuck on a full disk"
    if settled["status"] == "waiting_for_input":
        run_cancel(stack, run_id)
    shots = [s for s in run_steps(run_id) if s["tool"] == "screenshot"]
    if not shots or shots[0]["state"] not in ("succeeded", "failed"):
        return f"the screenshot step ended {[s['state'] for s in shots]}"
    return ""
