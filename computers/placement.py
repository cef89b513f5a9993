"""Computers on demand: started when asked or needed, placed on an executor host's slot, stopped when idle.

* **Start.** ``computer_start`` (``POST /api/computers/{id}/start``, a run that starts on a stopped
  computer) marks the computer wanted and places it: on the least loaded live host with a free slot
  (``ExecutorHost``: one that synced within ``RAM_EXECUTOR_STALE_SECONDS``). The host starts its
  executor at its next sync, with a fresh executor token handed over in that answer only.
* **No computer runs twice.** Placement takes the row locks of the live hosts (in id order) and of
  the computer: a computer is placed only while it has no host, and it leaves its host only when
  that host reports its executor gone (``host_sync``), so its slot stays taken while it stops.
* **Capacity.** A host has ``capacity`` slots and an account at most
  ``RAM_ACCOUNT_MAX_RUNNING_COMPUTERS`` computers placed at once. When no slot is free, the least
  recently used idle computer (of the account when the account is at its cap) is stopped to make
  room; when none is idle, the computer waits unplaced (``computer_wait_reason`` says why) and is
  placed as soon as a slot frees (every sync places what waits).
* **Idle stop.** A computer with no run that needs it, no viewer (an open visual session, the
  person's control among them) and no pause that keeps it (a takeover holds it) for
  ``RAM_COMPUTER_IDLE_SECONDS`` is no longer wanted (``computers_idle_stop``, from the Celery
  beat): its host stops its executor cleanly (the profile stays on disk), and it costs no process.

Written for several hosts: the choice of a host, the locks and the release are per host; with one
host (``make run``) they simply always pick it.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from computers.errors import ExecutorTokenForeign, ExecutorTokenInvalid
from computers.models import Computer, ExecutorHost
from computers.selectors import computer_is_ready, heartbeat_stale_after
from computers.services import computer_stopped, executor_process_gone, executor_token_issue
from computers.tokens import executor_token_digest

HOST_TOKEN_PREFIX = "ram_host_"

WAIT_STARTING = "Its computer is starting."
WAIT_NO_HOST = "Its computer waits for an executor host: none is running (manage.py run_executor_host)."
WAIT_NO_SLOT = (
    "Its computer waits for a free slot: every computer slot runs a computer that is in use "
    "(none is idle to stop), so it starts when one is free."
)
WAIT_SLOT_FREEING = "Its computer starts as soon as a computer slot frees: an idle computer is stopping to make room."
WAIT_ACCOUNT_CAP = (
    "Its computer waits: the account runs RAM_ACCOUNT_MAX_RUNNING_COMPUTERS computers already, each in use, "
    "so it starts when one of them is idle."
)


# --- host tokens ---------------------------------------------------------------------


def host_token_issue(*, host_id: str) -> str:
    """A new host token for ``host_id`` (created when missing), shown once; the previous one stops working."""
    raw = HOST_TOKEN_PREFIX + secrets.token_urlsafe(32)
    host, _ = ExecutorHost.objects.get_or_create(pk=host_id)
    host.token_digest = executor_token_digest(raw)
    host.save(update_fields=["token_digest"])
    return raw


def host_authenticate(*, host_id: str, raw_token: str) -> None:
    """The token is ``host_id``'s own, else ExecutorTokenInvalid (unknown) or ExecutorTokenForeign (another host's)."""
    if not raw_token.startswith(HOST_TOKEN_PREFIX):
        raise ExecutorTokenInvalid()
    digest = executor_token_digest(raw_token)
    own = ExecutorHost.objects.filter(pk=host_id).values_list("token_digest", flat=True).first()
    if own and hmac.compare_digest(own, digest):
        return
    if ExecutorHost.objects.filter(token_digest=digest).exists():
        raise ExecutorTokenForeign()
    raise ExecutorTokenInvalid()


# --- reads ---------------------------------------------------------------------------


def live_hosts() -> QuerySet[ExecutorHost]:
    """Hosts that synced within the stale window and have slots."""
    return ExecutorHost.objects.filter(
        last_seen_at__gte=timezone.now() - heartbeat_stale_after(), capacity__gt=0
    ).exclude(token_digest="")


def hosts_exist() -> bool:
    """Whether computers here are started on demand: some executor host is live."""
    return live_hosts().exists()


def _needed() -> Q:
    """A computer something needs now: a run on it that is queued, running or holding it (a takeover's
    pause keeps it), or a visual session not ended (a viewer, a person's control)."""
    runs = Computer.objects.filter(
        Q(runs__status__in=["queued", "running"]) | Q(runs__holds_computer=True), pk=OuterRef("pk")
    )
    sessions = Computer.objects.filter(
        visual_sessions__created_at__isnull=False, visual_sessions__ended_at__isnull=True, pk=OuterRef("pk")
    )
    return Q(Exists(runs)) | Q(Exists(sessions))


def _idle_since(seconds: float) -> Q:
    cutoff = timezone.now() - timedelta(seconds=seconds)
    return Q(last_used_at__isnull=True) | Q(last_used_at__lte=cutoff)


def computer_wait_reason(computer: Computer) -> str | None:
    """Why a computer that should run is not ready yet, for a person to read (None when ready or not wanted)."""
    if not computer.wanted_running or computer_is_ready(computer):
        return None
    if computer.host_id is not None:
        return WAIT_STARTING
    if not hosts_exist():
        return WAIT_NO_HOST
    placed = Computer.objects.filter(host__isnull=False)
    mine = placed.filter(account_id=computer.account_id)
    if mine.count() >= int(settings.RAM_ACCOUNT_MAX_RUNNING_COMPUTERS):
        return WAIT_SLOT_FREEING if mine.filter(wanted_running=False).exists() else WAIT_ACCOUNT_CAP
    return WAIT_SLOT_FREEING if placed.filter(wanted_running=False).exists() else WAIT_NO_SLOT


# --- transitions ---------------------------------------------------------------------


def computer_start(*, computer: Computer) -> Computer:
    """Start the computer if it is not running (idempotent): wanted now, placed when a slot is free.

    A computer already ready stays as it is (its ``last_used_at`` moves: it is in use)."""
    now = timezone.now()
    with transaction.atomic():
        locked = Computer.objects.select_for_update().get(pk=computer.pk)
        if locked.deleted_at is not None or not locked.is_active:
            return locked
        locked.last_used_at = now
        fields = ["last_used_at"]
        # An executor started by hand serves it (ready, on no host): a host starting another would supersede it.
        by_hand = locked.host_id is None and computer_is_ready(locked)
        if not locked.wanted_running and not by_hand:
            locked.wanted_running = True
            locked.start_requested_at = now
            fields += ["wanted_running", "start_requested_at"]
            if locked.status == Computer.Status.FAILED and locked.host_id is None:
                locked.status = Computer.Status.OFFLINE
                fields.append("status")
        locked.save(update_fields=fields)
    # Placed once this commits: inside a caller's transaction (the queue's) the computer's row lock
    # is held until then, and placement takes the hosts' locks before the computers' (as a host's
    # sync does), never the other way round.
    transaction.on_commit(computers_place)
    return Computer.objects.get(pk=computer.pk)


def computer_touch(*, computer_id: str | None) -> None:
    """The computer was used now (a run started or let go of it, a visual session opened or ended)."""
    if computer_id is not None:
        Computer.objects.filter(pk=computer_id).update(last_used_at=timezone.now())


def computer_take(*, computer_id: str) -> bool:
    """A run starts on the computer now: used now, unless its stop was decided (unwanted while on a
    host); False then. The one statement writes the computer's row, so an idle stop deciding at the
    same moment (``computer_stop_if_idle``) either sees it used or made it unwanted first. A computer on no
    host (an executor started by hand) is never stopped here and is always taken."""
    taken = Computer.objects.filter(Q(wanted_running=True) | Q(host__isnull=True), pk=computer_id)
    return taken.update(last_used_at=timezone.now()) == 1


def computer_stop(*, computer_id: str) -> bool:
    """No longer wanted: its host stops its executor cleanly at its next sync (the profile stays)."""
    return Computer.objects.filter(pk=computer_id, wanted_running=True).update(wanted_running=False) == 1


def computer_stop_if_idle(*, computer_id: str, seconds: float) -> bool:
    """``computer_stop`` decided in the one statement that checks, on the computer's row as it is
    then, that nothing needs it and it was not used for ``seconds``: a run admitted meanwhile wrote
    the row (``computer_take``) and keeps it."""
    return (
        Computer.objects.filter(pk=computer_id, wanted_running=True, host__isnull=False)
        .filter(_idle_since(seconds))
        .exclude(_needed())
        .update(wanted_running=False)
        == 1
    )


@dataclasses.dataclass
class _Slots:
    host: ExecutorHost
    used: int

    @property
    def free(self) -> int:
        return self.host.capacity - self.used


def computers_place() -> int:
    """Place every wanted computer that has no host, oldest start first; the number placed.

    Under the row locks of the live hosts and of each computer placed: two placements (two web
    processes, a sync) never give one computer two hosts, nor one slot two computers."""
    placed = 0
    with transaction.atomic():
        hosts = list(live_hosts().select_for_update().order_by("pk"))
        if not hosts:
            return 0
        used = dict(
            Computer.objects.filter(host__in=hosts).values("host_id").annotate(n=Count("pk")).values_list("host_id", "n")
        )
        slots = [_Slots(host, used.get(host.pk, 0)) for host in hosts]
        waiting = (
            Computer.objects.select_for_update()
            .filter(wanted_running=True, host__isnull=True, deleted_at__isnull=True, is_active=True)
            .order_by("start_requested_at", "pk")
        )
        cap = int(settings.RAM_ACCOUNT_MAX_RUNNING_COMPUTERS)
        for computer in waiting:
            mine = Computer.objects.filter(account_id=computer.account_id, host__isnull=False).count()
            if mine >= cap:
                _evict(account_id=computer.account_id)
                continue  # placed when the evicted one's host reports it gone
            free = [slot for slot in slots if slot.free > 0]
            if not free:
                _evict(account_id=None)
                continue
            slot = min(free, key=lambda s: (s.used / max(1, s.host.capacity), s.host.pk))
            computer.host = slot.host
            computer.save(update_fields=["host"])
            slot.used += 1
            placed += 1
    return placed


def _evict(*, account_id: Any) -> bool:
    """Stop the least recently used idle computer (of ``account_id`` when given) to free a slot.

    Idle: placed, wanted, ready, nothing needs it (``_needed``) and unused for a moment (a computer
    just started for a run is not taken back before that run starts). One already stopping counts:
    its slot frees soon, so nothing more is stopped."""
    placed = Computer.objects.filter(host__isnull=False)
    if account_id is not None:
        placed = placed.filter(account_id=account_id)
    if placed.filter(wanted_running=False).exists():
        return True
    grace = min(float(settings.RAM_COMPUTER_IDLE_SECONDS), 5.0)
    candidates = (
        placed.filter(wanted_running=True, status=Computer.Status.READY)
        .filter(_idle_since(grace))
        .exclude(_needed())
        .order_by("last_used_at", "pk")
    )
    for candidate in candidates:
        if computer_is_ready(candidate) and computer_stop_if_idle(computer_id=candidate.pk, seconds=grace):
            return True
    return False


def computers_idle_stop() -> list[str]:
    """Stop every computer idle for ``RAM_COMPUTER_IDLE_SECONDS`` (the beat's sweep); their ids."""
    seconds = float(settings.RAM_COMPUTER_IDLE_SECONDS)
    idle = (
        Computer.objects.filter(wanted_running=True, host__isnull=False)
        .filter(_idle_since(seconds))
        .exclude(_needed())
        .values_list("pk", flat=True)
    )
    return [pk for pk in list(idle) if computer_stop_if_idle(computer_id=pk, seconds=seconds)]


def host_process_gone(*, host_id: str) -> None:
    """The host process died (its supervisor saw it): its executors died with it (they are offline now),
    and it takes no placement until it syncs again. Its wanted computers stay placed on it: it starts
    them again at its first sync."""
    ExecutorHost.objects.filter(pk=host_id).update(last_seen_at=None)
    for computer_id in Computer.objects.filter(host_id=host_id).values_list("pk", flat=True):
        executor_process_gone(computer_id=computer_id)


@dataclasses.dataclass(frozen=True)
class HostOrders:
    """What a host must do: start these executors (each with its fresh token), stop these."""

    start: list[dict[str, str]]
    stop: list[str]


def host_sync(
    *, host_id: str, capacity: int, running: list[str], exited: list[str], health: dict[str, Any]
) -> HostOrders:
    """A host's report (its slots, the executors it runs, those that exited since) and its orders.

    Only computers placed on this host are started or released here: a host token reaches no other.
    An executor that exited while still wanted is marked offline at once and started again; one that
    exited or was stopped while no longer wanted frees its slot."""
    now = timezone.now()
    ExecutorHost.objects.filter(pk=host_id).update(capacity=capacity, health=health, last_seen_at=now)
    for computer_id in exited:
        if Computer.objects.filter(pk=computer_id, host_id=host_id).exists():
            executor_process_gone(computer_id=computer_id)
    # Not wanted and no executor on the host any more: the slot is free, and the runs that waited
    # for that computer's stop may start it again (``computer_stopped``).
    released = Computer.objects.filter(host_id=host_id, wanted_running=False).exclude(pk__in=running)
    gone = list(released.values_list("pk", flat=True))
    if gone:
        Computer.objects.filter(pk__in=gone, wanted_running=False).update(
            host=None, status=Computer.Status.OFFLINE, executor_address=""
        )
        transaction.on_commit(lambda: [computer_stopped.send(sender=Computer, computer_id=pk) for pk in gone])
    computers_place()
    mine = dict(
        Computer.objects.filter(host_id=host_id, wanted_running=True, deleted_at__isnull=True).values_list(
            "pk", "status"
        )
    )
    start = [
        {"computer_id": pk, "token": executor_token_issue(computer_id=pk)} for pk in sorted(mine) if pk not in running
    ]
    stop = sorted(pk for pk in running if pk not in mine)
    return HostOrders(start=start, stop=stop)
