"""An upgrade from a database migrated before the computers app existed: the Computer and
DiagnosticArtifact models moved from ``executor`` to ``computers`` without touching their tables, so
every computer, run, visual session and artifact is still there and still linked; the content types
are the same rows (a staff member's permissions and the admin's history keep working), and the
admin's old addresses lead to the new ones."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_create
from computers.models import Computer, DiagnosticArtifact
from computers.selectors import computer_binding_holds, computers_for_account
from runs.models import Run
from visual.models import VisualSession

pytestmark = pytest.mark.db

# The last migrations before the move (every app's state as a database had it).
BEFORE_THE_MOVE = [
    ("executor", "0010_merge_executor_token_and_settings"),
    ("runs", "0011_long_wait"),
    ("visual", "0001_initial"),
    ("computers", None),
]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader: the applied migrations as they are now


def _latest() -> list[tuple[str, str | None]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()  # type: ignore[return-value]


@pytest.fixture
def before_the_move(transactional_db: None) -> Iterator[MigrationExecutor]:
    latest = _latest()
    executor = _migrate(BEFORE_THE_MOVE)
    try:
        yield executor
    finally:
        _migrate(latest)


def test_an_upgrade_keeps_every_computer_run_session_artifact_permission_and_admin_page(
    before_the_move: MigrationExecutor,
) -> None:
    old = before_the_move.loader.project_state([key for key in BEFORE_THE_MOVE if key[1] is not None]).apps
    assert "computer" in old.all_models["executor"] and "computer" not in old.all_models["computers"]
    OldAccount = old.get_model("accounts", "Account")
    OldComputer = old.get_model("executor", "Computer")
    OldRun = old.get_model("runs", "Run")
    OldSession = old.get_model("visual", "VisualSession")
    OldArtifact = old.get_model("executor", "DiagnosticArtifact")
    account = OldAccount.objects.create(name="before")
    binding = uuid.uuid4()
    OldComputer.objects.create(id="old-pc", account=account, name="From before", binding=binding, status="offline")
    run = OldRun.objects.create(account=account, computer_id="old-pc", computer_binding=binding, status="waiting_for_input")
    session = OldSession.objects.create(account=account, computer_id="old-pc", mode="observe")
    artifact = OldArtifact.objects.create(
        account=account, computer_id="old-pc", content_type="image/png", storage_name="old.png"
    )
    # What a database of that time held: the executor app's content types, a staff member allowed to
    # change computers through them, and the admin's record of a change.
    computer_type = ContentType.objects.get(app_label="executor", model="computer")
    change = Permission.objects.get(content_type=computer_type, codename="change_computer")
    view = Permission.objects.get(content_type=computer_type, codename="view_computer")
    staff = User.objects.create_user(username="operator", password="correct horse battery", is_staff=True)
    staff.user_permissions.add(change, view)
    LogEntry.objects.create(
        user=staff, content_type=computer_type, object_id="old-pc", object_repr="old-pc", action_flag=CHANGE,
        change_message="Renamed before the move",
    )

    _migrate(_latest())

    computer = Computer.objects.get(pk="old-pc")
    assert computer.account_id == account.pk and computer.name == "From before"
    assert Run.objects.get(pk=run.pk).computer == computer
    assert list(computer.runs.values_list("pk", flat=True)) == [run.pk]
    assert VisualSession.objects.get(pk=session.pk).computer == computer
    assert DiagnosticArtifact.objects.get(pk=artifact.pk).computer == computer
    assert computer_binding_holds(computer_id="old-pc", account_id=str(account.pk), binding=str(binding))
    assert ContentType.objects.get_for_model(Computer).pk == computer_type.pk, "the same content type row"
    assert not ContentType.objects.filter(app_label="executor").exists()
    staff = User.objects.get(pk=staff.pk)
    assert staff.has_perm("computers.change_computer") and staff.has_perm("computers.view_computer")

    # The models work as before: new rows beside the old ones, and the API lists the old computer.
    newer = Computer.objects.create(id="new-pc", account=computer.account, name="After")
    Run.objects.create(account=computer.account, computer=newer)
    key = api_key_create(account=computer.account, kind=ApiKey.Kind.RUNNER)[0]
    assert [c.pk for c in computers_for_account(account=key.account)] == ["new-pc", "old-pc"]

    client = Client()
    assert client.post("/accounts/login/", {"username": "operator", "password": "correct horse battery"}).status_code in (302, 303)
    assert client.get("/admin/computers/computer/").status_code == 200
    history = client.get("/admin/computers/computer/old-pc/history/")
    assert history.status_code == 200 and "Renamed before the move" in history.content.decode()
    moved = client.get("/admin/executor/computer/old-pc/change/?_changelist_filters=q%3Dold")
    assert moved.status_code == 302
    assert moved["Location"] == "/admin/computers/computer/old-pc/change/?_changelist_filters=q%3Dold"
    assert client.get(moved["Location"]).status_code == 200
