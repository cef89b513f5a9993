"""Load on the running stack: continues raced 64 at a time, and the mixed soak.

``concurrent_continues``: 64 simultaneous ``POST /api/runs/{id}/continue`` with one idempotency key
must create exactly one continuation and answer 64 byte-identical 201s; with 64 different keys,
one 201 and 63 409s. The continuations are counted in the database, not in the answers.

``mixed_load``: for the profile's soak time, 8 scripted runs loop over the local portal, 4 viewers
watch the two computers, API readers send 50 requests per second alternating between the two web
processes, and a harness continues paused runs with repeated idempotency keys. Every answer that
is not a designed refusal is an error. Memory (PSS, Chromium's renderers counted with their browser)
and open file descriptors of each process tree are sampled after the warm-up and at the end; the
rows that should be swept (unfinished runs, open screen sockets, unconsumed expired tickets) must
not have grown once the load has drained.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import secrets
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from proof.core import Profile, Row, Stack

CONTINUES = 64
PAUSE_TIMEOUT_SECONDS = 180
RUN_TIMEOUT_SECONDS = 180
READS_PER_SECOND = 50
RUNNERS = 8
VIEWERS = 4
TOLERANCE = 0.10
# Chromium under this load is not in its steady state for its first minutes: it starts a utility
# process (the on-device model service and a broker: about 45 descriptors) about 3 minutes after
# launch, and its renderers' heaps grow for about 4 minutes before they level off (measured: an
# executor's tree 474 -> 580 MiB over the first 5 minutes, then 490-580 MiB for the next 5). The
# executors' trees are judged only when the warm-up covers that; a shorter soak reports them.
BROWSER_WARM_UP_SECONDS = 300.0


# --- the API as a client sees it -----------------------------------------------------------


def api(
    stack: Stack,
    method: str,
    path: str,
    *,
    key: str | None = None,
    url: str | None = None,
    timeout: float = 30,
    **kwargs: Any,
) -> requests.Response:
    """One request to the next web process (or ``url``), with the runner key unless told."""
    headers = {"Authorization": f"Bearer {key or stack.runner_key}", **kwargs.pop("headers", {})}
    return requests.request(method, (url or stack.next_url()) + path, headers=headers, timeout=timeout, **kwargs)


def run_create(stack: Stack, computer_id: str, steps: list[dict[str, Any]], goal: str = "proof") -> str:
    answer = api(stack, "POST", "/api/runs", json={"computer_id": computer_id, "task": {"goal": goal, "steps": steps}})
    if answer.status_code != 201:
        raise RuntimeError(f"creating a run answered {answer.status_code}: {answer.text[:200]}")
    return str(answer.json()["id"])


def run_status(stack: Stack, run_id: str) -> str:
    answer = api(stack, "GET", f"/api/runs/{run_id}")
    answer.raise_for_status()
    return str(answer.json()["status"])


def wait_status(stack: Stack, run_id: str, wanted: set[str], seconds: float) -> str:
    """Poll until the run's status is one of ``wanted`` (or final); the last status seen."""
    deadline = time.monotonic() + seconds
    status = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException, ValueError):
            status = run_status(stack, run_id)
            if status in wanted or status in {"succeeded", "failed", "cancelled", "continued"}:
                return status
        time.sleep(0.3)
    return status


def paused_run(stack: Stack, computer_id: str) -> str:
    """A run waiting for a person (takeover), ready to be continued."""
    run_id = run_create(stack, computer_id, [{"tool": "request_takeover", "arguments": {"reason": "captcha"}}])
    status = wait_status(stack, run_id, {"waiting_for_input"}, PAUSE_TIMEOUT_SECONDS)
    if status != "waiting_for_input":
        raise RuntimeError(f"run {run_id} did not pause (status {status!r})")
    return run_id


def continuations_of(run_id: str) -> int:
    """Continuations in the database (the proof's ORM reads the proof's own PostgreSQL)."""
    from runs.models import Run

    return Run.objects.filter(continued_from_id=uuid.UUID(run_id)).count()


def cancel_open_runs(stack: Stack) -> int:
    """Cancel every run of the account that has not ended (what a fuzzer left), through the API."""
    from runs.models import Run

    open_runs = Run.objects.filter(account_id=stack.account_id).exclude(status__in=Run.TERMINAL)
    cancelled = 0
    for run_id in open_runs.values_list("id", flat=True):
        with contextlib.suppress(requests.RequestException):
            cancelled += api(stack, "POST", f"/api/runs/{run_id}/cancel", json={}).status_code == 200
    return cancelled


@contextlib.contextmanager
def runs_cancelled_after(stack: Stack) -> Iterator[None]:
    """Whatever runs a fuzzer leaves open (paused ones hold their computer) are cancelled afterwards."""
    try:
        yield
    finally:
        cancel_open_runs(stack)


def idempotency_key() -> str:
    return "proof-" + secrets.token_hex(12)


# --- 8: concurrent continues ---------------------------------------------------------------


def _race(stack: Stack, run_id: str, keys: list[str]) -> list[tuple[int, bytes]]:
    """Send one continue per key at the same instant (alternating web processes)."""
    barrier = threading.Barrier(len(keys))
    urls = [stack.next_url() for _ in keys]

    def one(index: int) -> tuple[int, bytes]:
        body = json.dumps({"idempotency_key": keys[index]})
        headers = {"Content-Type": "application/json"}
        barrier.wait(timeout=60)
        try:
            answer = api(
                stack, "POST", f"/api/runs/{run_id}/continue", url=urls[index], data=body, headers=headers, timeout=60
            )
        except requests.RequestException as exc:
            return -1, type(exc).__name__.encode()
        return answer.status_code, answer.content

    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        return list(pool.map(one, range(len(keys))))


def concurrent_continues(stack: Stack, profile: Profile) -> list[Row]:
    cancel_open_runs(stack)  # a run an earlier experiment left paused would hold its computer
    rounds = max(1, profile.repetitions // 10)
    same = Tally()
    different = Tally()
    for index in range(rounds):
        computer_id = stack.computers[index % len(stack.computers)]
        # One key, 64 times: one continuation, 64 identical 201s.
        run_id = paused_run(stack, computer_id)
        key = idempotency_key()
        answers = _race(stack, run_id, [key] * CONTINUES)
        created = continuations_of(run_id)
        first = next((body for status, body in answers if status == 201), None)
        same.tries += CONTINUES
        same.held += sum(1 for status, body in answers if status == 201 and body == first)
        same.lost += 1 if created == 0 else 0
        same.duplicated += max(0, created - 1)
        same.statuses.update(status for status, _ in answers)
        same.bodies.update(body for _, body in answers)
        # 64 keys: one continuation, one 201, 63 409s naming it.
        run_id = paused_run(stack, computer_id)
        answers = _race(stack, run_id, [idempotency_key() for _ in range(CONTINUES)])
        created = continuations_of(run_id)
        wins = [status for status, _ in answers if status == 201]
        different.tries += CONTINUES
        different.held += min(1, len(wins)) + sum(1 for status, _ in answers if status == 409)
        different.lost += 1 if created == 0 else 0
        different.duplicated += max(0, created - 1, len(wins) - 1)
        different.statuses.update(status for status, _ in answers)
    return [
        Row(
            experiment="continue ×64, one key",
            tries=same.tries,
            held=same.held,
            lost=same.lost,
            duplicated=same.duplicated,
            figure=f"{rounds} round(s): {same.describe()}; {len(same.bodies)} distinct answer body(ies) per round",
        ),
        Row(
            experiment="continue ×64, 64 keys",
            tries=different.tries,
            held=different.held,
            lost=different.lost,
            duplicated=different.duplicated,
            figure=f"{rounds} round(s): {different.describe()}",
        ),
    ]


@dataclass
class Tally:
    tries: int = 0
    held: int = 0
    lost: int = 0
    duplicated: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    bodies: Counter[bytes] = field(default_factory=Counter)

    def describe(self) -> str:
        return ", ".join(f"{n}×{status if status > 0 else 'no answer'}" for status, n in sorted(self.statuses.items()))


# --- 7: mixed load -------------------------------------------------------------------------


@dataclass
class Load:
    """What the load saw; every counter is added under the lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    # Set while process trees are sampled: the readers hold their short connections for a moment, so
    # that the descriptors counted are the processes' own, not whichever requests were in flight.
    quiet: threading.Event = field(default_factory=threading.Event)
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what[:120]] += 1


def _runner(stack: Stack, load: Load, index: int) -> None:
    """A scripted run over the portal's pages, again and again until the soak ends."""
    computer_id = stack.computers[index % len(stack.computers)]
    for turn in itertools.count():
        if load.stop.is_set():
            return
        page = f"{stack.portal_url}/page/r{index}-{turn}"
        steps = [
            {"tool": "navigate", "arguments": {"url": page}},
            {"tool": "navigate", "arguments": {"url": f"{stack.portal_url}/welcome"}},
            {"tool": "finish", "arguments": {"output": {"turn": turn}}},
        ]
        try:
            run_id = run_create(stack, computer_id, steps, goal=f"proof load {index}")
        except (requests.RequestException, RuntimeError, ValueError) as exc:
            load.error(f"run create: {exc}")
            time.sleep(1)
            continue
        with load.lock:
            load.run_ids = [*load.run_ids[-49:], run_id]
        status = wait_status(stack, run_id, set(), RUN_TIMEOUT_SECONDS)
        if status == "succeeded":
            load.count("runs succeeded")
        else:
            load.error(f"run ended {status or 'without a status'}")


def _viewer(stack: Stack, load: Load, index: int) -> None:
    """An observer of one computer: counts frames; reconnects (new ticket) when the session ends by design."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    computer_id = stack.computers[index % len(stack.computers)]
    while not load.stop.is_set():
        url = stack.next_url()
        try:
            answer = api(
                stack, "POST", "/api/visual/sessions", url=url,
                json={"computer_id": computer_id, "mode": "observe", "transport": "jpeg-websocket-v1"},
                headers={"X-RAM-Intent": "visual-session"},
            )  # fmt: skip
        except requests.RequestException as exc:
            load.error(f"viewer session: {type(exc).__name__}")
            time.sleep(1)
            continue
        if answer.status_code != 201:
            load.error(f"viewer session answered {answer.status_code}")
            time.sleep(1)
            continue
        session = answer.json()
        stack.plant(session["ticket"])
        ws_url = url.replace("http://", "ws://", 1) + session["websocket_path"]
        try:
            with connect(
                ws_url, subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],  # type: ignore[list-item]
                open_timeout=20, max_size=4_000_000,
            ) as socket:  # fmt: skip
                while not load.stop.is_set():
                    try:
                        message = socket.recv(timeout=1)
                    except TimeoutError:
                        continue
                    if isinstance(message, bytes):
                        load.count("frames")
                    elif json.loads(message).get("type") == "error":
                        text = str(json.loads(message).get("message", ""))
                        # The 900 s limit is a designed end: reconnect with a new ticket.
                        if "900 s" in text:
                            load.count("viewer sessions ended at 900 s")
                        else:
                            load.error(f"viewer error: {text}")
                        break
        except ConnectionClosed:
            if not load.stop.is_set():
                load.count("viewer reconnections")
        except (OSError, TimeoutError) as exc:
            load.error(f"viewer socket: {type(exc).__name__}")
            time.sleep(1)


def _reader_paths(stack: Stack, load: Load) -> Iterator[tuple[str, str]]:
    """What an API reader asks for, in turn, with the runner and the observer key."""
    keys = itertools.cycle([stack.runner_key, stack.observer_key])
    for turn in itertools.count():
        key = next(keys)
        with load.lock:
            recent = load.run_ids[-1] if load.run_ids else None
        # The computers (and their screens) are the runner key's; a task_observer key reads runs.
        choices = ["/api/runs?limit=20", "/api/computers" if key == stack.runner_key else "/api/runs?limit=5"]
        if recent is not None:
            choices += [f"/api/runs/{recent}", f"/api/runs/{recent}/events?limit=50", f"/api/runs/{recent}/steps"]
        yield key, choices[turn % len(choices)]


def _readers(stack: Stack, load: Load) -> None:
    """50 requests per second, spread over a small pool, alternating between the web processes."""
    interval = 1.0 / READS_PER_SECOND
    paths = _reader_paths(stack, load)

    def read(key: str, path: str) -> None:
        began = time.monotonic()
        load.count("reading")
        try:
            answer = api(stack, "GET", path, key=key, timeout=30)
        except requests.RequestException as exc:
            load.error(f"read {path.split('?')[0]}: {type(exc).__name__}")
            return
        finally:
            load.count("reading", -1)
        elapsed = time.monotonic() - began
        with load.lock:
            load.latencies.append(elapsed)
        if answer.status_code == 200 and answer.headers.get("Content-Type", "").startswith("application/json"):
            load.count("reads")
        else:
            load.error(f"read answered {answer.status_code}")

    # Enough threads that 50 requests per second hold even when an answer takes over half a second.
    with ThreadPoolExecutor(max_workers=32) as pool:
        next_at = time.monotonic()
        while not load.stop.is_set():
            if load.quiet.is_set():
                time.sleep(0.05)
                next_at = time.monotonic()
                continue
            key, path = next(paths)
            pool.submit(read, key, path)
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))


def _continuer(stack: Stack, load: Load) -> None:
    """A harness that pauses, continues with one key three times (one continuation, the same answer),
    then with a new key (a designed 409)."""
    for turn in itertools.count():
        if load.stop.is_set():
            return
        try:
            run_id = paused_run(stack, stack.computers[turn % len(stack.computers)])
        except (requests.RequestException, RuntimeError, ValueError) as exc:
            load.error(f"pause: {exc}")
            continue
        key = idempotency_key()
        answers = []
        for _ in range(3):
            try:
                answer = api(stack, "POST", f"/api/runs/{run_id}/continue", json={"idempotency_key": key})
                answers.append((answer.status_code, answer.content))
            except requests.RequestException as exc:
                load.error(f"continue: {type(exc).__name__}")
        if len(answers) == 3 and {s for s, _ in answers} == {201} and len({b for _, b in answers}) == 1:
            load.count("continues replayed")
        else:
            load.error(f"continue answers {[s for s, _ in answers]}")
        other = api(stack, "POST", f"/api/runs/{run_id}/continue", json={"idempotency_key": idempotency_key()})
        if other.status_code == 409:
            load.count("designed refusals (409 already continued)")
        else:
            load.error(f"second key answered {other.status_code}")
        if continuations_of(run_id) != 1:
            load.error("not exactly one continuation")


# --- memory and descriptors of each process tree ----------------------------------------------


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The parent is the second field after the command (which may hold spaces and parentheses).
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant (a Celery pool, an executor's Chromium and its renderers)."""
    children = _children_of()
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def process_trees(stack: Stack) -> dict[str, int]:
    """The root pid of each of RAM's process trees the stack started (web, worker, beat, executor)."""
    roots: dict[str, int] = {}
    children = [*getattr(stack, "webs", []), *getattr(stack, "workers", [])]
    beat = getattr(stack, "beat", None)
    if beat is not None:
        children.append(beat)
    children += list(getattr(stack, "executors", {}).values())
    for child in children:
        if child.alive():
            roots[str(child.name)] = int(child.pid)
    return roots


@dataclass(frozen=True)
class Sample:
    pss: dict[str, int]
    fds: dict[str, int]
    roots: dict[str, int]


def sample(stack: Stack) -> Sample:
    roots = process_trees(stack)
    pss, fds = {}, {}
    for name, root in roots.items():
        pids = tree(root)
        pss[name] = sum(pss_kib(p) for p in pids)
        fds[name] = sum(open_fds(p) for p in pids)
    return Sample(pss=pss, fds=fds, roots=roots)


def _median(samples: list[Sample], attribute: str, name: str) -> float:
    values = [getattr(s, attribute).get(name, 0) for s in samples if name in getattr(s, attribute)]
    return statistics.median(values) if values else 0.0


# --- rows that should be swept ------------------------------------------------------------------


def transient_rows() -> dict[str, int]:
    """Rows that the server must end or sweep: they may exist while work is in flight, never pile up."""
    from django.utils import timezone

    from runs.models import Run
    from visual.models import VisualSession, VisualTicket

    return {
        "unfinished runs": Run.objects.exclude(status__in=Run.TERMINAL)
        .exclude(status=Run.Status.WAITING_FOR_INPUT, continuation__isnull=False)
        .count(),
        "open screen sessions": VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).count(),
        "expired unused tickets of open sessions": VisualTicket.objects.filter(
            consumed_at__isnull=True, expires_at__lt=timezone.now(), session__ended_at__isnull=True
        ).count(),
    }


def _drain(stack: Stack, seconds: float) -> dict[str, int]:
    """Wait (bounded) for the work in flight to end; the transient rows left."""
    deadline = time.monotonic() + seconds
    rows = transient_rows()
    while time.monotonic() < deadline and any(rows.values()):
        time.sleep(2)
        rows = transient_rows()
    return rows


def mixed_load(stack: Stack, profile: Profile) -> list[Row]:
    load = Load()
    warm_up = BROWSER_WARM_UP_SECONDS if profile.soak_seconds >= 900 else max(30.0, profile.soak_seconds / 6)
    judge_executors = warm_up >= BROWSER_WARM_UP_SECONDS
    workers: list[Callable[[], None]] = [
        *(functools.partial(_runner, stack, load, i) for i in range(RUNNERS)),
        *(functools.partial(_viewer, stack, load, i) for i in range(VIEWERS)),
        functools.partial(_readers, stack, load),
        functools.partial(_continuer, stack, load),
    ]
    threads = [threading.Thread(target=work, name=f"proof-load-{n}", daemon=True) for n, work in enumerate(workers)]
    cancel_open_runs(stack)
    transient_before = transient_rows()
    began = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(warm_up)
    reads_at_warm_up = load.counts["reads"]
    warm_at = time.monotonic()
    # Five samples at the end of the warm-up against five at the end of the soak (medians).
    after_warm_up = [_quiet_sample(stack, load) for _ in range(5)]
    time.sleep(max(0.0, began + profile.soak_seconds - 30 - time.monotonic()))
    at_end = [_quiet_sample(stack, load) for _ in range(5)]
    read_rate = (load.counts["reads"] - reads_at_warm_up) / max(1.0, time.monotonic() - warm_at)
    load.stop.set()
    for thread in threads:
        thread.join(timeout=RUN_TIMEOUT_SECONDS + 30)
    left = _drain(stack, 120)

    rows: list[Row] = []
    work = load.counts["runs succeeded"] + load.counts["reads"] + load.counts["continues replayed"]
    errors = sum(load.errors.values())
    p99 = statistics.quantiles(load.latencies, n=100)[98] if len(load.latencies) >= 100 else 0.0
    worst = "; ".join(f"{n}× {what}" for what, n in load.errors.most_common(3))
    rows.append(
        Row(
            experiment=f"mixed load {profile.soak_seconds // 60} min",
            tries=work + errors,
            held=work,
            lost=errors,
            duplicated=0,
            figure=(
                f"{load.counts['runs succeeded']} runs, {load.counts['reads']} reads at {read_rate:.0f}/s "
                f"(p99 {p99 * 1000:.0f} ms), {load.counts['frames']} frames to {VIEWERS} viewers, "
                f"{load.counts['continues replayed']} continues replayed, "
                f"{load.counts['designed refusals (409 already continued)']} designed 409s; errors: {worst or 'none'}"
            ),
        )
    )
    rows.append(_flat_row("memory (PSS) per process tree", after_warm_up, at_end, "pss", "MiB", 1024, judge_executors))
    rows.append(_flat_row("open fds per process tree", after_warm_up, at_end, "fds", "", 1, judge_executors))
    grown = {name: (transient_before.get(name, 0), n) for name, n in left.items() if n > transient_before.get(name, 0)}
    rows.append(
        Row(
            experiment="rows to sweep after the load",
            tries=len(left),
            held=len(left) - len(grown),
            lost=len(grown),
            duplicated=0,
            figure=", ".join(f"{name} {transient_before.get(name, 0)}→{n}" for name, n in left.items()),
        )
    )
    return rows


def _quiet_sample(stack: Stack, load: Load) -> Sample:
    """A sample taken once no API read is in flight (at most 15 s; runs, viewers and continues go on)."""
    load.quiet.set()
    try:
        deadline = time.monotonic() + 15
        while load.counts["reading"] > 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # the servers close what the last answers left open
        return sample(stack)
    finally:
        load.quiet.clear()
        time.sleep(3)


def _flat_row(
    title: str, warm: list[Sample], end: list[Sample], attribute: str, unit: str, scale: int, judge_executors: bool
) -> Row:
    """Each process tree within 10 % of its value after the warm-up (medians of five samples each);
    a tree whose root changed (it restarted) does not hold. Without ``judge_executors`` (a warm-up
    shorter than Chromium's), the executors' trees are shown but neither counted nor judged."""
    names = sorted(set(warm[-1].roots) | set(end[-1].roots))
    judged = [name for name in names if judge_executors or not name.startswith("executor")]
    held, parts, restarted = 0, [], 0
    worst_name, worst_change = "", 0.0
    for name in names:
        before, after = _median(warm, attribute, name), _median(end, attribute, name)
        parts.append(f"{name} {before / scale:.0f}→{after / scale:.0f}{unit}")
        if name not in judged:
            continue
        same_process = warm[-1].roots.get(name) == end[-1].roots.get(name)
        change = (after - before) / before if before else 0.0
        if same_process and before and abs(change) <= TOLERANCE:
            held += 1
        if not same_process:
            restarted += 1
        if abs(change) >= abs(worst_change):
            worst_name, worst_change = name, change
    figure = f"worst {worst_name} {worst_change:+.1%}; " + ", ".join(parts)
    if restarted:
        figure = f"{restarted} tree(s) restarted during the load; " + figure
    if len(judged) < len(names):
        figure += " (executors not judged: the warm-up is shorter than Chromium's, about 5 min)"
    return Row(experiment=title, tries=len(judged), held=held, lost=0, duplicated=0, figure=figure)
