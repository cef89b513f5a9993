"""The per-process cache of authenticated API keys (accounts/services.py): a hit costs no query;
revocation and deactivation through the services take effect at once; a change made elsewhere
(another web process, or SQL) within RAM_API_KEY_CACHE_SECONDS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from accounts import services
from accounts.models import Account, ApiKey
from accounts.services import account_activity_set, api_key_cache_clear, api_key_revoke
from core.clock import ManualClock
from tests.conftest import Api

pytestmark = pytest.mark.django_db

BOUND = 1.0


@pytest.fixture
def clock(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[ManualClock]:
    settings.RAM_API_KEY_CACHE_SECONDS = BOUND
    fake = ManualClock()
    monkeypatch.setattr(services, "CLOCK", fake)
    api_key_cache_clear()
    yield fake
    api_key_cache_clear()


def test_a_cached_key_costs_no_query(api: Api, runner_key: str, clock: ManualClock, django_assert_num_queries: Any) -> None:
    assert api.get("/api/computers", runner_key).status_code == 200
    with django_assert_num_queries(1):  # the computers only
        assert api.get("/api/computers", runner_key).status_code == 200
    clock.advance(BOUND)
    with django_assert_num_queries(2):  # past the bound the key is read again
        assert api.get("/api/computers", runner_key).status_code == 200


def test_revoking_through_the_service_takes_effect_at_once(api: Api, account: Account, runner_key: str, clock: ManualClock) -> None:
    assert api.get("/api/computers", runner_key).status_code == 200
    api_key_revoke(key=ApiKey.objects.get(account=account))
    assert api.get("/api/computers", runner_key).status_code == 401


def test_deactivating_through_the_service_takes_effect_at_once(api: Api, account: Account, runner_key: str, clock: ManualClock) -> None:
    assert api.get("/api/computers", runner_key).status_code == 200
    account_activity_set(account=account, is_active=False, actor="test")
    assert api.get("/api/computers", runner_key).status_code == 403


def test_a_revocation_made_elsewhere_takes_effect_within_the_bound(
    api: Api, account: Account, runner_key: str, clock: ManualClock
) -> None:
    assert api.get("/api/computers", runner_key).status_code == 200
    # As another web process (or SQL) would: this process's cache is not told.
    ApiKey.objects.filter(account=account).update(revoked_at=timezone.now())
    clock.advance(BOUND * 0.9)
    assert api.get("/api/computers", runner_key).status_code == 200  # the bound, not more
    clock.advance(BOUND * 0.1)
    assert api.get("/api/computers", runner_key).status_code == 401


def test_a_deactivation_made_elsewhere_takes_effect_within_the_bound(
    api: Api, account: Account, runner_key: str, clock: ManualClock
) -> None:
    assert api.get("/api/computers", runner_key).status_code == 200
    Account.objects.filter(pk=account.pk).update(is_active=False)
    clock.advance(BOUND)
    assert api.get("/api/computers", runner_key).status_code == 403


def test_refused_keys_are_never_cached(api: Api, account: Account, runner_key: str, clock: ManualClock) -> None:
    Account.objects.filter(pk=account.pk).update(is_active=False)
    assert api.get("/api/computers", runner_key).status_code == 403
    Account.objects.filter(pk=account.pk).update(is_active=True)
    assert api.get("/api/computers", runner_key).status_code == 200
    wrong = runner_key[:-4] + ("AAAA" if not runner_key.endswith("AAAA") else "BBBB")
    assert api.get("/api/computers", wrong).status_code == 401
    assert api.get("/api/computers", wrong).status_code == 401


def test_each_request_gets_its_own_copy(account: Account, runner_key: str, clock: ManualClock) -> None:
    first = services.api_key_authenticate(raw_key=runner_key)
    assert first is not None
    first.account.name = "changed by one request"
    second = services.api_key_authenticate(raw_key=runner_key)
    assert second is not None and second.account.name == account.name
    assert second is not first and second.account is not first.account


def test_the_cache_is_off_at_zero(api: Api, runner_key: str, settings: Any, django_assert_num_queries: Any) -> None:
    settings.RAM_API_KEY_CACHE_SECONDS = 0
    api_key_cache_clear()
    assert api.get("/api/computers", runner_key).status_code == 200
    with django_assert_num_queries(2):
        assert api.get("/api/computers", runner_key).status_code == 200
