"""The control state machine on a clock the test moves: the agent's lease and the
person's grant expire exactly at their limits (and when the clock jumps past
them), a renewal moves the deadline, one lease at a time, none on a failed
browser, a new one after the person hands control back, and only the exact
grant id acts."""

from __future__ import annotations

import base64
import secrets

import pytest

from core.clock import ManualClock
from executor.control import AGENT_LEASE_SECONDS, HUMAN_GRANT_SECONDS, Control, ControlError


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_the_agents_lease_ends_at_its_limit(clock: ManualClock) -> None:
    control = Control(clock=clock)
    lease = control.lease_acquire()
    clock.advance(AGENT_LEASE_SECONDS - 0.001)
    assert control.lease_check(lease.id) is lease
    clock.advance(0.001)
    with pytest.raises(ControlError) as ended:
        control.lease_check(lease.id)
    assert ended.value.reason == "lease_invalid"
    assert control.state == "available"


def test_a_renewed_lease_lives_a_full_period_from_the_renewal(clock: ManualClock) -> None:
    control = Control(clock=clock)
    lease = control.lease_acquire()
    clock.advance(AGENT_LEASE_SECONDS - 1)
    control.lease_renew(lease.id)
    clock.advance(AGENT_LEASE_SECONDS - 1)
    assert control.lease_check(lease.id) is lease


async def test_the_persons_grant_expires_into_released_never_back_to_the_agent(clock: ManualClock) -> None:
    control = Control(clock=clock)
    lease = control.lease_acquire()
    grant, counters = await control.takeover()
    assert control.state == "human" and counters.stopped_processes == 0
    with pytest.raises(ControlError):
        control.lease_check(lease.id)
    clock.advance(HUMAN_GRANT_SECONDS - 0.5)
    control.grant_renew(grant.id)
    clock.advance(HUMAN_GRANT_SECONDS - 0.5)
    assert control.grant_check(grant.id) is grant
    clock.advance(0.5)
    with pytest.raises(ControlError) as expired:
        control.grant_check(grant.id)
    assert expired.value.reason == "grant_invalid"
    assert control.state == "released"


def test_a_lease_ends_when_the_clock_jumps_past_its_deadline(clock: ManualClock) -> None:
    """A loaded loop checks late: a deadline already behind ``now`` has ended, not only one equal to it."""
    control = Control(clock=clock)
    lease = control.lease_acquire()
    clock.advance(AGENT_LEASE_SECONDS + 5)
    with pytest.raises(ControlError) as ended:
        control.lease_check(lease.id)
    assert ended.value.reason == "lease_invalid"
    assert control.state == "available" and control.lease is None


async def test_a_grant_left_past_its_deadline_is_released(clock: ManualClock) -> None:
    control = Control(clock=clock)
    grant, _ = await control.takeover()
    clock.advance(HUMAN_GRANT_SECONDS + 5)
    with pytest.raises(ControlError) as expired:
        control.grant_renew(grant.id)
    assert expired.value.reason == "grant_invalid"
    assert control.state == "released" and control.grant is None


def test_one_lease_at_a_time(clock: ManualClock) -> None:
    control = Control(clock=clock)
    lease = control.lease_acquire()
    with pytest.raises(ControlError) as taken:
        control.lease_acquire()
    assert taken.value.reason == "leased"
    assert control.lease is lease and control.lease_check(lease.id) is lease


def test_a_failed_browser_gives_no_lease(clock: ManualClock) -> None:
    control = Control(clock=clock)
    control.fail()
    with pytest.raises(ControlError) as failed:
        control.lease_acquire()
    assert failed.value.reason == "unavailable"
    assert control.state == "unavailable" and control.lease is None


async def test_after_the_person_hands_back_the_agent_needs_and_gets_a_new_lease(clock: ManualClock) -> None:
    control = Control(clock=clock)
    old = control.lease_acquire()
    grant, _ = await control.takeover()
    control.grant_release(grant.id)
    assert control.state == "released"
    with pytest.raises(ControlError) as gone:
        control.lease_check(old.id)
    assert gone.value.reason == "lease_invalid"
    lease = control.lease_acquire()
    assert control.state == "leased" and lease.id != old.id
    assert control.lease_check(lease.id) is lease


async def test_only_the_exact_grant_id_acts(clock: ManualClock) -> None:
    control = Control(clock=clock)
    grant, _ = await control.takeover()
    deadline = grant.expires_at
    for wrong in ("", grant.id[:-1], grant.id + "A", secrets.token_urlsafe(16)):
        for use in (control.grant_check, control.grant_renew, control.grant_release):
            with pytest.raises(ControlError) as refused:
                use(wrong)
            assert refused.value.reason == "grant_invalid"
    assert control.state == "human" and control.grant is grant and grant.expires_at == deadline


def test_a_lease_id_is_128_random_bits(clock: ManualClock) -> None:
    """The lease id is the agent's bearer value: 16 random bytes, URL-safe, new at each lease."""
    control = Control(clock=clock)
    ids = []
    for _ in range(3):
        lease = control.lease_acquire()
        assert len(base64.urlsafe_b64decode(lease.id + "==")) == 16
        ids.append(lease.id)
        control.lease_release(lease.id)
    assert len(set(ids)) == 3


def test_a_manual_clock_never_goes_back(clock: ManualClock) -> None:
    with pytest.raises(ValueError):
        clock.advance(-1)
