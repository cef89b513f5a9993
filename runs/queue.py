"""The run queue: one run per computer, a per-account limit of running runs, fair dispatch.

Runs wait here, in the database, not in the broker: a run created for a busy
computer, or beyond its account's limit, stays ``queued`` with its
``queue_position`` and gets no task until it is admitted.

- **One run per computer.** The run that holds a computer (``Run.holds_computer``,
  unique per computer at the database) is the one running on it, one paused at a
  takeover of it (a person is on that computer), or the continuation of such a
  pause (first in line). Every other pause, and the end of a run, releases it
  (``runs.state.run_result_set``). The holder keeps the executor's agent lease from
  step to step (``runs.browser``).
- **FIFO per computer.** A computer's queued runs start in the order they were
  queued; ``queue_position`` 1 is the next to start.
- **Per-account limit.** An account has at most ``RAM_ACCOUNT_MAX_ACTIVE_RUNS`` runs
  running at once (default: one below the workers' concurrency, so one account never
  fills every worker). The rest stay queued with their position; none is refused.
- **Fair between accounts.** When several runs may start at once, the account with
  the fewest running runs goes first, then the oldest run. Each running run has at
  most one step in the broker at a time and its next step goes to the back of the
  line, so workers that free up take steps in turn across running runs, of which no
  account has more than its limit.

Admission happens only in ``queue_dispatch``, serialised installation-wide, after
every transition that queues a run or frees a computer or a slot (after commit),
and from the sweep, so a dispatch lost with a dead process is redone.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.dispatch import Signal
from django.utils import timezone

from computers.models import Computer
from computers.placement import computer_start, computer_take, computer_wait_reason, hosts_exist
from computers.selectors import computer_is_ready
from runs.models import Run
from runs.state import run_event_append

logger = logging.getLogger(__name__)

# Sent after commit for each admitted run that the run loop drives (``run_id``): its first step is enqueued.
run_admitted = Signal()

# The installation-wide lock of admission (a PostgreSQL advisory lock; "RAMQ").
QUEUE_LOCK_KEY = 0x52414D51
# A computer's queue: its holder first (a continuation after a takeover), then first come, first served.
QUEUE_ORDER = ("-holds_computer", "created_at", "id")


def account_limit() -> int:
    return max(1, int(settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS))


def _serialise() -> None:
    """Take the queue's lock for this transaction. SQLite's IMMEDIATE transactions are
    already one writer at a time; PostgreSQL takes an advisory transaction lock."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [QUEUE_LOCK_KEY])


# --- reads ------------------------------------------------------------------


def queue_ahead() -> Case:
    """An annotation: how many queued runs of the same computer come before this one (``QUEUE_ORDER``:
    its holder, then older runs, then equal times by id); 0 for a run that is not waiting in a queue
    (not queued, or its computer's holder: ``queue_position`` reads it for no other run).

    Three counts that each follow the ``run_queue_per_computer`` index (or the holder's own), not one
    whose ``OR`` made the database read every queued run of the computer for each run of a page."""

    def ahead(*conditions: Q) -> Coalesce:
        queued = Run.objects.filter(computer_id=OuterRef("computer_id"), status=Run.Status.QUEUED)
        # COUNT(*): the older runs' count is read from the index alone.
        counted = queued.filter(*conditions).order_by().values("computer_id").annotate(n=Count("*")).values("n")
        return Coalesce(Subquery(counted), 0)

    older = ahead(Q(created_at__lt=OuterRef("created_at")))
    same_time = ahead(Q(created_at=OuterRef("created_at"), id__lt=OuterRef("id")))
    # The holder (at most one per computer) when it is not already counted as older or same-time.
    holder_after = ahead(
        Q(holds_computer=True),
        Q(created_at__gt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), id__gt=OuterRef("id")),
    )
    return Case(
        When(status=Run.Status.QUEUED, holds_computer=False, then=older + same_time + holder_after),
        default=Value(0),
    )


def queue_position(run: Run) -> int | None:
    """1 for the next run to start on its computer; None unless the run is queued.

    Reads the ``queue_ahead`` annotation when the run was loaded with it (lists cost
    no extra query), else asks the database.
    """
    if run.status != Run.Status.QUEUED or run.computer_id is None:
        return None
    if run.holds_computer:
        return 1
    ahead = getattr(run, "queue_ahead", None)
    if ahead is None:
        ahead = Run.objects.filter(pk=run.pk).annotate(queue_ahead=queue_ahead()).values_list("queue_ahead", flat=True)[0]
    return int(ahead) + 1


# --- transitions ------------------------------------------------------------


@dataclass(frozen=True)
class _Waiting:
    id: uuid.UUID
    computer_id: str
    account_id: uuid.UUID
    holds_computer: bool
    created_at: datetime
    external: bool


def queue_dispatch(*, current: uuid.UUID | None = None) -> bool:
    """Start every run that may start now; True when ``current`` was among them.

    For each computer that no other run holds, its first queued run starts if its
    account is below the limit; across accounts, the one with the fewest running
    runs goes first. A started run is ``running``, holds its computer, and has a
    ``run_started`` event; after commit, ``run_admitted`` is sent for each one the
    loop drives (except ``current``, whose caller is already stepping it). External
    runs start the same way and then wait for their harness's actions.
    """
    admitted: list[_Waiting] = []
    with transaction.atomic():
        _serialise()
        heads: dict[str, _Waiting] = {}
        rows = (
            Run.objects.filter(status=Run.Status.QUEUED, computer__isnull=False)
            .order_by(*QUEUE_ORDER)
            .values_list("id", "computer_id", "account_id", "holds_computer", "created_at", "agent_config__type")
        )
        for run_id, computer_id, account_id, holds, created_at, agent_type in rows:
            if computer_id not in heads:
                heads[computer_id] = _Waiting(run_id, computer_id, account_id, holds, created_at, agent_type == "external")
        if not heads:
            return False
        holders = dict(
            Run.objects.filter(holds_computer=True, computer_id__in=list(heads)).values_list("computer_id", "id")
        )
        # A draining computer's executor restarts soon: its runs wait (the sweep dispatches after the restart).
        draining = set(Computer.objects.filter(pk__in=list(heads), draining=True).values_list("pk", flat=True))
        candidates = [
            head
            for head in heads.values()
            if holders.get(head.computer_id) in (None, head.id) and head.computer_id not in draining
        ]
        running = Counter(
            {
                row["account_id"]: row["n"]
                for row in Run.objects.filter(status=Run.Status.RUNNING, account_id__in={c.account_id for c in candidates})
                .values("account_id")
                .annotate(n=Count("id"))
            }
        )
        limit = account_limit()
        stopped, stopping = _stopped_on_demand({c.computer_id for c in candidates})
        while candidates:
            candidates.sort(key=lambda c: (running[c.account_id], c.created_at, str(c.id)))
            pick = candidates.pop(0)
            if running[pick.account_id] >= limit:
                break  # every other candidate's account runs at least as many
            if pick.computer_id in stopping:
                # Its stop was decided (idle, or to free a slot): the executor is going away, so no run
                # starts on it; once its host reports it gone (``computer_stopped``) it starts anew.
                continue
            if pick.computer_id in stopped:
                # Its computer is stopped: it starts (a new generation), and the run starts once it is
                # ready (``computer_started``); until then it stays queued, first in its line.
                computer_start(computer=stopped[pick.computer_id])
                continue
            if _admit(pick.id, pick.computer_id):
                running[pick.account_id] += 1
                admitted.append(pick)
        started = [run.id for run in admitted if not run.external and run.id != current]

        def announce() -> None:
            for run_id in started:
                run_admitted.send(sender=Run, run_id=run_id)

        transaction.on_commit(announce)
    return any(run.id == current for run in admitted)


class _Stopping(Exception):
    """The run's computer is stopping: its admission is rolled back."""


def _stopped_on_demand(computer_ids: set[str]) -> tuple[dict[str, Computer], set[str]]:
    """Of ``computer_ids``, where computers start on demand (an executor host is live): those not
    ready (to start), and those still on a host whose stop was decided (stopping: to wait for). Where
    no host is live, an executor is started by hand and a run starts as before."""
    if not computer_ids or not hosts_exist():
        return {}, set()
    rows = Computer.objects.filter(pk__in=list(computer_ids), deleted_at__isnull=True, is_active=True)
    stopping = {row.pk for row in rows if not row.wanted_running and row.host_id is not None}
    return {row.pk: row for row in rows if row.pk not in stopping and not computer_is_ready(row)}, stopping


def _admit(run_id: uuid.UUID, computer_id: str | None = None) -> bool:
    now = timezone.now()
    try:
        with transaction.atomic():
            updated = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
                status=Run.Status.RUNNING, holds_computer=True, started_at=now, updated_at=now
            )
            if updated != 1:
                return False
            # In use from now (not idle), unless its stop was decided since the dispatch read it: then
            # the run waits (rolled back) and starts the computer anew once it is gone.
            if computer_id is not None and not computer_take(computer_id=computer_id):
                raise _Stopping()
            run_event_append(run=Run.objects.get(pk=run_id), kind="run_started")
    except IntegrityError:
        # Another run holds the computer after all (a concurrent continuation): it stays queued.
        logger.info("Run %s waits: its computer is held.", run_id)
        return False
    except _Stopping:
        logger.info("Run %s waits: its computer is stopping.", run_id)
        return False
    return True


def queue_reason(run: Run) -> str | None:
    """Why a queued run has not started yet, for a person to read (None unless queued)."""
    if run.status != Run.Status.QUEUED or run.computer_id is None:
        return None
    position = queue_position(run) or 1
    if position > 1 or Run.objects.filter(computer_id=run.computer_id, holds_computer=True).exclude(pk=run.pk).exists():
        return "Its computer is in use by another run; it starts after the runs ahead of it."
    computer = Computer.objects.filter(pk=run.computer_id).first()
    waiting = computer_wait_reason(computer) if computer is not None else None
    if waiting is not None:
        return waiting
    if Run.objects.filter(account_id=run.account_id, status=Run.Status.RUNNING).count() >= account_limit():
        return "The account runs RAM_ACCOUNT_MAX_ACTIVE_RUNS runs already; it starts when one of them ends or pauses."
    return None


def queue_enter(*, run: Run) -> None:
    """Record that a new run waits in its computer's queue (called when it is created)."""
    run_event_append(run=run, kind="run_queued", data={"queue_position": queue_position(run) or 1})


def hold_passed_on(*, run: Run) -> dict[str, Any]:
    """What a continuation of ``run`` (row locked) inherits of its computer: the hold and the
    agent lease when the run paused at a takeover of it (it goes first), nothing otherwise.
    The paused run lets go of both in the same transaction."""
    if not run.holds_computer:
        return {}
    inherited = {"holds_computer": True, "executor_lease": run.executor_lease}
    Run.objects.filter(pk=run.pk).update(holds_computer=False, executor_lease="")
    run.holds_computer, run.executor_lease = False, ""
    return inherited
