"""The pause-kind registry: one module per kind, read everywhere a kind matters;
an unknown kind cannot be opened, listed or built."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from accounts.models import Account
from computers.models import Computer
from runs import services
from runs.contracts import REQUIRED_ACTION, RUN_RESULT, ContinuePause
from runs.errors import InterventionUnavailable
from runs.models import Run, RunEvent
from runs.pauses import PAUSE_KINDS, UnknownPauseKind, continue_, pause_kind
from runs.queue import queue_dispatch
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


# --- Every fact of a kind is in its record -------------------------------------------------------

# The modules that may name a kind: its record's package and the unions of the persisted result.
_MAY_NAME_KINDS = ("runs/pauses/", "runs/contracts.py")
_PACKAGES = ("core", "accounts", "vault_bridge", "runs", "visual", "notifications", "webhooks", "ops", "ramsite")


def _kind_names() -> set[str]:
    names = set(PAUSE_KINDS)
    return names | {kind.descriptor_kind for kind in PAUSE_KINDS.values() if kind.descriptor_kind}


def _constants(node: ast.AST) -> list[object]:
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return []


def _namings(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Where code compares a value with a kind's name, or holds or reads a table keyed by kinds' names."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, str(v)) for v in _constants(side) if v in names]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.isupper():
            # A module's table read by a kind's name (``KIND_WORDS["credential"]``).
            found += [(node.lineno, str(v)) for v in _constants(node.slice) if v in names]
        elif isinstance(node, ast.Dict):
            keyed = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
            if len(keyed) >= 2:
                found += [(node.lineno, str(v)) for v in keyed]
    return found


def test_no_module_outside_the_registry_names_a_kind() -> None:
    """A new kind needs its record (and its two models in the unions), nothing else: no other
    module compares a pause's kind (or a descriptor's) with a name, and no table is keyed by them."""
    root = Path(__file__).resolve().parents[2]
    names = _kind_names()
    offenders: list[str] = []
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if "/migrations/" in relative or relative.startswith(_MAY_NAME_KINDS):
                continue
            for line, name in _namings(ast.parse(path.read_text(), relative), names):
                offenders.append(f"{relative}:{line} names {name!r}")
    for path in sorted((root / "templates").rglob("*.html")):
        for match in re.finditer(r"\.kind\s*[!=]=\s*[\"'](\w+)[\"']", path.read_text()):
            if match.group(1) in names:
                offenders.append(f"{path.relative_to(root).as_posix()} names {match.group(1)!r}")
    assert offenders == []


def test_the_scan_finds_a_kind_named_in_a_comparison_or_a_table() -> None:
    names = _kind_names()
    code = 'a = kind == "takeover"\nb = {"credential": 1, "connection": 2}\nc = WORDS["human_control"]\n'
    assert [name for _, name in _namings(ast.parse(code), names)] == [
        "takeover",
        "credential",
        "connection",
        "human_control",
    ]
    assert _namings(ast.parse('d = {"tool": "x", "credential": 1}\ne = f(kind="takeover")\n'), names) == []


def test_each_kind_states_its_facts() -> None:
    relations = {f.name for f in Run._meta.related_objects}
    for kind in PAUSE_KINDS.values():
        assert kind.request_relation is None or kind.request_relation in relations, kind.name
        if kind.descriptor_kind is not None:
            assert kind.words, kind.name
            assert kind.reason_words("captcha") == "a CAPTCHA"
            assert not kind.notes_opening or kind.opened_note, kind.name
    assert {k.name for k in PAUSE_KINDS.values() if k.keeps_computer} == {"takeover"}
    assert {k.name: k.request_relation for k in PAUSE_KINDS.values() if k.request_relation} == {
        "credential": "credential_requests",
        "connection": "connection_requests",
    }
    assert PAUSE_KINDS["credits"].reason_words("insufficient_credits") == "the account ran out of credits"
    assert PAUSE_KINDS["takeover"].reason_words("no such reason") == "something only a person can do"


class _KeepingContinue(continue_.Continue):
    """The ``continue`` kind with one fact changed: it keeps the computer."""

    keeps_computer = True


def test_whether_a_pause_keeps_the_computer_is_its_records_fact(
    monkeypatch: pytest.MonkeyPatch, account: Account, computer: Computer
) -> None:
    """Writing a pause reads the kind's record: a record that says it keeps its computer keeps it."""

    def holding() -> Run:
        run = services.run_create(
            account=account,
            computer=computer,
            task={"goal": "test", "steps": [{"tool": "finish", "arguments": {}}]},
            agent_config={"type": "scripted"},
            max_model_calls=3,
            microcredits_per_model_call=0,
        )
        queue_dispatch()
        run = Run.objects.get(pk=run.pk)
        assert run.holds_computer
        return run

    first = holding()
    services.run_pause(run=first, pause=ContinuePause(kind="continue", reason="max_model_calls_reached"))
    assert not Run.objects.get(pk=first.pk).holds_computer
    services.run_cancel(run=Run.objects.get(pk=first.pk))
    monkeypatch.setitem(PAUSE_KINDS, "continue", _KeepingContinue())
    second = holding()
    services.run_pause(run=second, pause=ContinuePause(kind="continue", reason="max_model_calls_reached"))
    assert Run.objects.get(pk=second.pk).holds_computer
