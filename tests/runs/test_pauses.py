"""The pause-kind registry: one module per kind, read everywhere a kind matters;
an unknown kind cannot be opened, listed or built."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from accounts.models import Account
from computers.models import Computer
from runs import services
from runs.contracts import REQUIRED_ACTION, RUN_RESULT
from runs.errors import InterventionUnavailable
from runs.models import Run, RunEvent
from runs.pauses import PAUSE_KINDS, UnknownPauseKind, pause_kind
from runs.tools import TOOLS
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def test_every_persisted_pause_and_required_action_kind_has_a_module() -> None:
    pause_models = {kind.model for kind in PAUSE_KINDS.values()}
    result_schema = RUN_RESULT.json_schema()
    pause_kinds = {
        sub["properties"]["kind"]["const"]
        for name, sub in result_schema["$defs"].items()
        if name.endswith("Pause")
    }
    action_kinds = set(REQUIRED_ACTION.json_schema()["discriminator"]["mapping"])
    assert set(PAUSE_KINDS) == pause_kinds == action_kinds
    assert {m.__name__ for m in pause_models} == {n for n in result_schema["$defs"] if n.endswith("Pause")}


def test_tools_that_pause_name_a_registered_kind() -> None:
    pausing = {tool.pauses for tool in TOOLS.values() if tool.pauses}
    assert pausing == {"takeover", "credential", "connection"}
    assert pausing <= set(PAUSE_KINDS)


def test_an_unknown_kind_has_no_entry() -> None:
    with pytest.raises(UnknownPauseKind):
        pause_kind("survey")


def test_kinds_with_a_page_have_their_texts_and_button() -> None:
    for kind in PAUSE_KINDS.values():
        if kind.descriptor_kind is None:
            assert kind.no_page_message
            continue
        texts = kind.texts(reason="captcha", state="pending")
        assert texts.progress and texts.user_action and texts.next_step
        assert kind.what_opening_does and kind.open_label


@pytest.fixture
def unknown_kind_run(account: Account, computer: Computer) -> Run:
    """A run whose stored pause names a kind no module knows (written by hand or by a newer version)."""
    return Run.objects.create(
        account=account,
        computer=computer,
        task={"goal": "x"},
        status=Run.Status.WAITING_FOR_INPUT,
        pause_kind="survey",
        result={"outcome": "needs_input", "pause": {"kind": "survey", "reason": "other"}},
    )


def test_an_unknown_kind_still_reads_and_lists_but_has_no_required_action(
    api: Api, unknown_kind_run: Run, runner_key: str
) -> None:
    read = api.get(f"/api/runs/{unknown_kind_run.id}", runner_key)
    assert read.status_code == 200
    assert "required_action" not in read.json()
    assert api.get("/api/runs", runner_key).status_code == 200
    assert api.get("/api/runs", runner_key, kind="survey").status_code == 400


def test_an_unknown_kind_is_impossible_to_open(
    api: Api, unknown_kind_run: Run, runner_key: str, account: Account, make_user: Callable[..., User]
) -> None:
    descriptor = api.get(f"/api/runs/{unknown_kind_run.id}/intervention-descriptor", runner_key)
    assert descriptor.status_code == 409
    with pytest.raises(InterventionUnavailable):
        services.intervention_open(run_id=str(unknown_kind_run.id), user=make_user(account), auth_method="password")
    assert not RunEvent.objects.filter(run=unknown_kind_run).exists()


def test_cancel_runs_every_kinds_cleanup(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> None:
    credential = make_paused_run(account, computer, "credential")
    connection = make_paused_run(account, computer, "connection")
    services.run_cancel(run=credential)
    services.run_cancel(run=connection)
    assert credential.credential_requests.get().state == "cancelled"
    assert connection.connection_requests.get().state == "cancelled"
