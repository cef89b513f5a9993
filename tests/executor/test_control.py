"""The control state machine's deadlines on a clock the test moves: the agent's
lease and the person's grant expire exactly at their limits, and a renewal
moves the deadline."""

from __future__ import annotations

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


def test_a_manual_clock_never_goes_back(clock: ManualClock) -> None:
    with pytest.raises(ValueError):
        clock.advance(-1)
