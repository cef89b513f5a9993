"""Create (idempotently) the demo account, its users, computer and one paused run per kind.

``--json`` prints exactly one JSON object for evaluators and tests; each call
mints a fresh runner key and task_observer key for the demo account.
"""

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Account, ApiKey, Membership
from accounts.services import api_key_create
from computers.models import Computer
from core.files import write_private
from runs.errors import InterventionUnavailable
from runs.loop import run_step_advance
from runs.models import Run
from runs.pauses import PAUSE_KINDS
from runs.pauses.credential import credential_request_deadline_extend
from runs.selectors import current_pause
from runs.services import run_cancel, run_create
from runs.state import run_computer_let_go

DEMO_ACCOUNT = "Demo account"
DEMO_COMPUTER = "demo-computer"
# How long a demo run may take to reach its pause when the worker, not this command, drives it.
PAUSE_WAIT_SECONDS = 120
# How long the capture a takeover pause takes just after it is written may take (the worker's).
PAUSE_CAPTURE_WAIT_SECONDS = 30


CREDENTIALS_FILE = "demo-credentials.json"
_LEGACY_PASSWORDS_FILE = "demo_passwords.json"


def credentials_path() -> Path:
    """Where the demo's passwords and runner key are kept, owner-only (0600)."""
    return Path(settings.VAR_DIR) / CREDENTIALS_FILE


def _stored_credentials() -> dict[str, str]:
    """The kept credentials; passwords only from an earlier version's file; empty on the first start."""
    for name in (CREDENTIALS_FILE, _LEGACY_PASSWORDS_FILE):
        path = Path(settings.VAR_DIR) / name
        if path.exists():
            return dict(json.loads(path.read_text()))
    return {}


def _to_terminal(text: str) -> bool:
    """Write to the controlling terminal itself, never to a redirected stdout (a log)."""
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(text)
    except OSError:
        return False
    return True


def _user(username: str, password: str, account: Account, *, staff: bool) -> None:
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username)
    user.is_staff = user.is_superuser = staff
    user.is_active = True
    user.set_password(password)
    user.save()
    Membership.objects.update_or_create(user=user, defaults={"account": account})


def _open_demo_run(account: Account, kind: str) -> Run | None:
    """A demo run still paused at ``kind`` with its intervention pending, to reuse."""
    for run in Run.objects.filter(account=account, task__demo=kind, status=Run.Status.WAITING_FOR_INPUT):
        paused = current_pause(run)
        if paused is None or paused.pause.kind != kind:
            continue
        try:
            state = PAUSE_KINDS[kind].intervention(run=run, pause=paused.pause)
        except InterventionUnavailable:
            continue
        if state.state == "pending":
            return run
    return None


def _demo_runs(account: Account, computer: Computer) -> dict[str, str]:
    """One paused run per kind, all on the demo computer. A takeover pause keeps its computer
    (the person acts on that screen and the continuation goes first); the demo's takeover has
    nothing on the screen to come back to, so it lets go and runs created on the demo computer
    start at once. A demo takeover of an earlier version that still holds it is cancelled."""
    for held in Run.objects.filter(account=account, computer=computer, holds_computer=True, task__demo="takeover"):
        run_cancel(run=held)
    runs = {}
    for kind in PAUSE_KINDS:
        run = _paused_demo_run(account, computer, kind)
        if run.holds_computer:
            _pause_capture_settled(run)
            run_computer_let_go(run=run)
        runs[kind] = str(run.id)
    _demo_request_lasts(runs["credential"])
    return runs


def _pause_capture_settled(run: Run) -> None:
    """Wait (seconds) for the capture of a pause that keeps its computer, taken just after the pause
    is written (``runs.browser.pause_captured_after``) by whoever reached it, the worker perhaps:
    letting go of the computer first would end the lease it is taken under. The demo's takeover
    held no lease before it paused, so the one taken for its capture goes once the capture is
    recorded (or failed); a run whose pause took none has nothing to wait for."""
    deadline = time.monotonic() + PAUSE_CAPTURE_WAIT_SECONDS
    while Run.objects.filter(pk=run.pk, holds_computer=True).exclude(executor_lease="").exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def _demo_request_lasts(run_id: str) -> None:
    """The demo's credential request lasts hours (at every start), not the minutes of a real one.

    The worker may be the one that reaches the pause: its request is waited for (a few seconds)."""
    deadline = time.monotonic() + PAUSE_WAIT_SECONDS
    run = Run.objects.get(pk=run_id)
    while not credential_request_deadline_extend(run=run, seconds=settings.RAM_DEMO_CREDENTIAL_REQUEST_TTL_SECONDS):
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def _paused_demo_run(account: Account, computer: Computer, kind: str) -> Run:
    existing = _open_demo_run(account, kind)
    if existing is not None:
        return existing
    plan = PAUSE_KINDS[kind].demo(origin=settings.RAM_PUBLIC_ORIGIN, account=account)
    run = run_create(
        account=account,
        computer=computer,
        task={"demo": kind, "goal": f"Demo run that pauses at {kind}", "steps": plan.steps},
        max_model_calls=plan.max_model_calls,
        microcredits_per_model_call=plan.microcredits_per_model_call,
    )
    # Drive the real run loop inline until the run pauses (a worker may share the work: then it is
    # waited for, a pause's capture included, which may take an internal call's 25 s on a loaded host).
    for _ in range(10):
        if not run_step_advance(run_id=run.id):
            break
    deadline = time.monotonic() + PAUSE_WAIT_SECONDS
    run.refresh_from_db()
    while run.status in (Run.Status.QUEUED, Run.Status.RUNNING) and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    return run


@dataclass
class Demo:
    account: Account
    computer: Computer
    stored: dict[str, str]  # the demo's passwords and the kept runner key
    first_start: bool


def demo_prepare() -> Demo:
    """The demo account, its users and computer, and the kept credentials (created on the first start)."""
    stored = _stored_credentials()
    first_start = "runner_key" not in stored
    passwords = {
        "demo": stored.get("demo") or secrets.token_urlsafe(12),
        "staff": stored.get("staff") or secrets.token_urlsafe(12),
    }
    with transaction.atomic():
        account, _ = Account.objects.get_or_create(name=DEMO_ACCOUNT, defaults={"microcredit_balance": 3_500_000})
        _user("demo", passwords["demo"], account, staff=False)
        _user("staff", passwords["staff"], account, staff=True)
        computer, _ = Computer.objects.get_or_create(
            id=DEMO_COMPUTER, defaults={"account": account, "name": "Demo computer"}
        )
    stored = {**stored, **passwords}
    if first_start:
        # Kept, never logged: shown once on the terminal, afterwards only this file's path.
        _, kept_key = api_key_create(account=account, kind=ApiKey.Kind.RUNNER, name="demo runner")
        stored = {**passwords, "runner_key": kept_key}
        write_private(credentials_path(), json.dumps(stored))
        (Path(settings.VAR_DIR) / _LEGACY_PASSWORDS_FILE).unlink(missing_ok=True)
    return Demo(account=account, computer=computer, stored=stored, first_start=first_start)


def demo_runs(demo: Demo) -> dict[str, str]:
    """One paused run per kind (each commits on its own and reaches its pause through the run loop).

    Run once the demo computer's executor is ready, so that each pause carries its capture."""
    return _demo_runs(demo.account, demo.computer)


def demo_banner(demo: Demo, runs: dict[str, str]) -> str:
    """What a person needs to start: the address, the users, where their passwords are kept.

    On the first start the passwords and the runner key also go to the controlling terminal
    (never to a redirected stdout, which may be a log), once."""
    origin = settings.RAM_PUBLIC_ORIGIN
    shown = demo.first_start and _to_terminal(
        "\nFirst start: these are shown once, here only.\n"
        f"  sign in as demo / {demo.stored['demo']} (account user)\n"
        f"  staff admin: {origin}/admin/ as staff / {demo.stored['staff']}\n"
        f"  runner key: {demo.stored['runner_key']}\n\n"
    )
    return (
        f"RAM is at {origin}\n"
        f"  demo users (demo, staff) and a runner key: {'shown once on the terminal; ' if shown else ''}"
        f"kept owner-only in {credentials_path()}\n"
        f"  credential run intervention: {origin}/tasks/{runs['credential']}/intervention\n"
    )


class Command(BaseCommand):
    help = "Create the demo account, users, computer and paused runs (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        demo = demo_prepare()
        runs = demo_runs(demo)
        if options["json"]:
            # Asked for explicitly (tests, evaluators): fresh keys, printed to stdout.
            _, runner_key = api_key_create(account=demo.account, kind=ApiKey.Kind.RUNNER, name="demo runner")
            _, observer_key = api_key_create(account=demo.account, kind=ApiKey.Kind.TASK_OBSERVER, name="demo observer")
            data = {
                "origin": settings.RAM_PUBLIC_ORIGIN,
                "account_id": str(demo.account.id),
                "user": {"username": "demo", "password": demo.stored["demo"]},
                "staff": {"username": "staff", "password": demo.stored["staff"]},
                "runner_key": runner_key,
                "observer_key": observer_key,
                "computer_id": demo.computer.id,
                "runs": runs,
            }
            self.stdout.write(json.dumps(data))
            return
        self.stdout.write(demo_banner(demo, runs))
