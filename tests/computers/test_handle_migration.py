"""An upgrade from a database whose computer ids were global: every computer keeps its id as its
id within its account (``handle``), so every run, visual session, artifact and binding still
reaches it; and from then on an id is unique per account, not across accounts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from accounts.models import Account
from computers.models import Computer, DiagnosticArtifact
from computers.placement import computer_start
from computers.selectors import computer_binding_holds, computer_state, computers_for_account
from runs.models import Run
from visual.models import VisualSession

pytestmark = pytest.mark.db

# The computers app as it was while ids were global.
GLOBAL_IDS = [("computers", "0001_initial")]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)


def _latest() -> list[tuple[str, str | None]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()  # type: ignore[return-value]


@pytest.fixture
def global_ids(transactional_db: None) -> Iterator[MigrationExecutor]:
    latest = _latest()
    executor = _migrate(GLOBAL_IDS)
    try:
        yield executor
    finally:
        _migrate(latest)


def test_an_upgrade_keeps_every_computer_named_by_its_id_in_its_account(global_ids: MigrationExecutor) -> None:
    old = global_ids.loader.project_state(list(global_ids.loader.applied_migrations)).apps
    assert "handle" not in {f.name for f in old.get_model("computers", "Computer")._meta.get_fields()}
    OldAccount = old.get_model("accounts", "Account")
    OldComputer = old.get_model("computers", "Computer")
    OldRun = old.get_model("runs", "Run")
    OldSession = old.get_model("visual", "VisualSession")
    OldArtifact = old.get_model("computers", "DiagnosticArtifact")
    first, second = OldAccount.objects.create(name="first"), OldAccount.objects.create(name="second")
    binding = uuid.uuid4()
    OldComputer.objects.create(id="old-pc", account=first, binding=binding)
    OldComputer.objects.create(id="other-pc", account=second)
    run = OldRun.objects.create(account=first, computer_id="old-pc", computer_binding=binding, status="waiting_for_input")
    session = OldSession.objects.create(account=first, computer_id="old-pc", mode="observe")
    artifact = OldArtifact.objects.create(account=first, computer_id="old-pc", content_type="image/png", storage_name="a.png")

    _migrate(_latest())

    computer = Computer.objects.get(pk="old-pc")
    assert computer.handle == "old-pc" and Computer.objects.get(pk="other-pc").handle == "other-pc"
    assert Run.objects.get(pk=run.pk).computer == computer
    assert VisualSession.objects.get(pk=session.pk).computer == computer
    assert DiagnosticArtifact.objects.get(pk=artifact.pk).computer == computer
    assert computer_binding_holds(computer_id="old-pc", account_id=str(first.pk), binding=str(binding))
    assert [c.pk for c in computers_for_account(account=Account.objects.get(pk=first.pk))] == ["old-pc"]
    # Not started on demand by the upgrade: stopped, on no executor host, until something starts it.
    assert (computer.wanted_running, computer.host_id, computer_state(computer)) == (False, None, ("stopped", None))
    assert computer_state(computer_start(computer=computer)) == ("starting", None)

    # From now on the same id may name a computer in another account, never twice in one.
    Computer.objects.create(id="second-copy", handle="old-pc", account=Account.objects.get(pk=second.pk))
    with pytest.raises(IntegrityError), transaction.atomic():
        Computer.objects.create(id="first-copy", handle="old-pc", account=Account.objects.get(pk=first.pk))

    # And back: the column goes, the computers stay.
    Computer.objects.filter(pk="second-copy").delete()
    _migrate(GLOBAL_IDS)
    _migrate(_latest())
    assert Computer.objects.get(pk="old-pc").handle == "old-pc"


@pytest.mark.django_db
def test_a_computer_created_by_staff_is_named_in_its_account_by_its_id() -> None:
    account = Account.objects.create(name="staff-made")
    assert Computer.objects.create(id="made-here", account=account).handle == "made-here"
    assert Computer.objects.get(pk="made-here").handle == "made-here"
