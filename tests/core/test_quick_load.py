"""Rows loaded through ``core.prepared.QuickLoad`` are the instances Django's own ``from_db`` builds:
the same attributes, state, deferred fields, related rows and signals."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from django.db.models import Model
from django.db.models.signals import post_init, pre_init

from accounts.models import Account, ApiKey
from computers.models import Computer
from core.prepared import QuickLoad, _quick_loads
from runs.models import Run

pytestmark = pytest.mark.django_db


def django_own(instance: Any) -> Any:
    """The same row as Django's own ``Model.from_db`` builds it."""
    cls = type(instance)
    names = [f.attname for f in cls._meta.concrete_fields if f.attname in instance.__dict__]
    return Model.from_db.__func__(cls, instance._state.db, names, [instance.__dict__[n] for n in names])  # type: ignore[attr-defined]


def fields_of(instance: Any) -> dict[str, Any]:
    return {k: v for k, v in instance.__dict__.items() if k != "_state"}


def state_of(instance: Any) -> tuple[Any, ...]:
    return (instance._state.adding, instance._state.db, instance._state.fields_cache)


@pytest.mark.parametrize("deferred", [False, True])
def test_a_quickly_loaded_row_is_djangos_own(
    account: Account, computer: Computer, runner_key: str, make_paused_run: Callable[..., Run], deferred: bool
) -> None:
    run = make_paused_run(account, computer, "takeover")
    runs = Run.objects.filter(pk=run.pk).select_related("computer", "account")
    if deferred:
        runs = runs.only("id", "status", "computer_id", "computer__id", "computer__name", "account__id")
    loaded = runs.get()
    for instance in (loaded, loaded.computer, loaded.account, ApiKey.objects.get(account=account)):
        assert isinstance(instance, QuickLoad) and _quick_loads(type(instance))
        expected = django_own(instance)
        assert fields_of(instance) == fields_of(expected)
        assert state_of(instance)[:2] == (False, "default") == state_of(expected)[:2]
        assert instance.get_deferred_fields() == expected.get_deferred_fields()
    assert loaded.computer.pk == computer.pk and loaded.account.name == account.name  # from the join, cached
    if deferred:
        assert "task" not in loaded.__dict__
        assert loaded.task == run.task  # a deferred field is still read on access
    # Saving a loaded row is an update of that row, as with Django's own instances.
    loaded.status = Run.Status.CANCELLED
    loaded.save(update_fields=["status"])
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


def test_a_quickly_loaded_row_sends_the_init_signals(account: Account) -> None:
    seen: list[tuple[str, Any]] = []

    def before(sender: Any, **kwargs: Any) -> None:
        seen.append(("pre", sender))

    def after(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(("post", instance.pk))

    pre_init.connect(before, sender=Account)
    post_init.connect(after, sender=Account)
    try:
        Account.objects.get(pk=account.pk)
    finally:
        pre_init.disconnect(before, sender=Account)
        post_init.disconnect(after, sender=Account)
    assert seen == [("pre", Account), ("post", account.pk)]


def test_a_model_whose_fields_are_not_plain_columns_keeps_djangos_load() -> None:
    def model(attribute: Any, *, generated: bool = False) -> type:
        meta = SimpleNamespace(concrete_fields=[SimpleNamespace(attname="photo", generated=generated)])
        return type("Fake", (), {"_meta": meta, "photo": attribute})

    plain = Run.__dict__["status"]  # Django's own attribute of a column
    assert _quick_loads(model(plain))
    assert not _quick_loads(model(property(lambda self: None)))  # a descriptor of its own (a file field's)
    assert not _quick_loads(model(plain, generated=True))  # a generated column
    assert all(_quick_loads(m) for m in (Run, Computer, Account, ApiKey))
