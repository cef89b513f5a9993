"""The human intervention transitions under concurrency and refusal, against real OpenBao and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connections

from accounts.errors import PasswordSessionRequired
from accounts.models import Account
from computers.models import Computer
from core.errors import DomainError
from runs import services
from runs.errors import CredentialRequestConflict, InterventionUnavailable, VaultRefusedForm
from runs.models import CredentialRequest, Run, RunEvent
from tests.support.vault import VaultServer


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


@pytest.mark.django_db(transaction=True)
def test_concurrent_opens_issue_exactly_one_invite(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run], vault: VaultServer
) -> None:
    run = make_paused_run(account, computer, "credential")
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def open_once() -> None:
        try:
            barrier.wait()
            target = services.intervention_open(run_id=str(run.id), user=person, auth_method="password")
            outcomes.append("invite" if "#invite=" in target else target)
        except DomainError as exc:
            outcomes.append(f"refused {type(exc).__name__}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=open_once) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["invite"] + ["refused CredentialFormAlreadyOpened"] * 5
    assert RunEvent.objects.filter(run=run, kind="credential_form_opened").count() == 1


def test_open_refuses_a_delegated_session(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    run = make_paused_run(account, computer, "credential")
    with pytest.raises(PasswordSessionRequired):
        services.intervention_open(run_id=str(run.id), user=person, auth_method="delegated")
    assert CredentialRequest.objects.get(run=run).opened_at is None


def test_save_before_open_is_refused(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run], vault: VaultServer
) -> None:
    run = make_paused_run(account, computer, "credential")
    with pytest.raises(CredentialRequestConflict):
        services.credential_request_save(
            run_id=str(run.id),
            user=person,
            auth_method="password",
            invite="s.abcdefghijklmnop",
            username="u",
            password="p",
            totp_secret=None,
        )
    assert CredentialRequest.objects.get(run=run).state == "pending"


def test_save_with_a_forged_invite_is_refused_by_vault(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run], vault: VaultServer
) -> None:
    run = make_paused_run(account, computer, "credential")
    services.intervention_open(run_id=str(run.id), user=person, auth_method="password")
    with pytest.raises(VaultRefusedForm) as refused:
        services.credential_request_save(
            run_id=str(run.id),
            user=person,
            auth_method="password",
            invite="s.forgedforgedforged",
            username="u",
            password="hunter2-secret",
            totp_secret=None,
        )
    assert "hunter2" not in refused.value.message
    assert CredentialRequest.objects.get(run=run).state == "pending"
    assert not RunEvent.objects.filter(run=run, kind="credential_saved").exists()


def test_save_after_cancel_is_refused(
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    vault: VaultServer,
    django_capture_on_commit_callbacks: Callable[..., object],
) -> None:
    run = make_paused_run(account, computer, "credential")
    target = services.intervention_open(run_id=str(run.id), user=person, auth_method="password")
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        services.run_cancel(run=run)
    with pytest.raises(InterventionUnavailable):
        services.credential_request_save(
            run_id=str(run.id),
            user=person,
            auth_method="password",
            invite=target.partition("#invite=")[2],
            username="u",
            password="p",
            totp_secret=None,
        )
    assert CredentialRequest.objects.get(run=run).state == "cancelled"
