"""Every rule of the intervention descriptor contract, valid and invalid variants."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from runs.contracts import InterventionEnvelope

RUN_ID = "11111111-1111-4111-8111-111111111111"
REQUEST_ID = "22222222-2222-4222-8222-222222222222"


def credential(**changes: Any) -> dict[str, Any]:
    base = {
        "version": 1,
        "run_id": RUN_ID,
        "computer_id": "computador-exemplo",
        "kind": "credential",
        "state": "pending",
        "reason": "authentication",
        "progress": "A tarefa pausou antes do login.",
        "user_action": "Abra o formulário protegido e cadastre a credencial.",
        "next_step": "Confira a dependência e peça continuação explícita.",
        "request_id": REQUEST_ID,
        "expires_at": "2026-10-11T23:00:00.000Z",
        "human_action": {
            "url": f"https://remote-agent-machine.carneiro.ai/tasks/{RUN_ID}/intervention",
            "requires_login": True,
        },
    }
    base.update(changes)
    return base


def human_control(**changes: Any) -> dict[str, Any]:
    data = credential(kind="human_control", reason="captcha")
    del data["request_id"], data["expires_at"]
    data.update(changes)
    return data


def google(**changes: Any) -> dict[str, Any]:
    data = credential(kind="google_connection", reason="authorization_required", request_id=RUN_ID)
    del data["expires_at"]
    data.update(changes)
    return data


def validate(intervention: dict[str, Any]) -> InterventionEnvelope:
    return InterventionEnvelope.model_validate({"intervention": intervention})


def test_spec_example_is_valid_and_round_trips() -> None:
    envelope = validate(credential())
    wire = envelope.to_wire()
    assert wire["intervention"]["expires_at"] == "2026-10-11T23:00:00.000Z"
    assert wire == {"intervention": credential()}


@pytest.mark.parametrize("make", [human_control, google])
def test_other_kinds_are_valid(make: Any) -> None:
    wire = validate(make()).to_wire()["intervention"]
    assert "expires_at" not in wire


def test_computer_id_of_128_characters_is_valid() -> None:
    validate(credential(computer_id="a" * 128))


@pytest.mark.parametrize(
    "computer_id", ["", "a" * 129, "-starts-with-dash", "_x", "has space", "dot.ted", "slash/x", "é"]
)
def test_invalid_computer_id_is_refused(computer_id: str) -> None:
    with pytest.raises(ValidationError):
        validate(credential(computer_id=computer_id))


@pytest.mark.parametrize(
    "field,value",
    [
        ("version", 2),
        ("version", "1"),
        ("version", True),
        ("version", 1.0),
        ("kind", "takeover"),
        ("state", "saved"),
        ("reason", "budget"),
        ("run_id", "not-a-uuid"),
        ("request_id", "nope"),
        ("expires_at", "2026-10-11T23:00:00"),  # no time zone
        ("expires_at", "tomorrow"),
    ],
)
def test_enum_and_type_violations_are_refused(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        validate(credential(**{field: value}))


@pytest.mark.parametrize("field", ["progress", "user_action", "next_step"])
@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "x" * 501,
        "😀" * 251,  # 502 UTF-16 code units
        "Open https://evil.example/login",
        "Open http://evil.example",
        "Open HTTPS://evil.example/login",  # a scheme is case-insensitive, and so is the check
        "Open Http://evil.example",
        "Use the link with #invite=abc",
        "invite=abc",
        "Your ram-ticket.AAAA",
        "Authorization: Bearer abc",
        "key ram_rk_abc_def",
    ],
)
def test_unsafe_or_empty_texts_are_refused(field: str, text: str) -> None:
    with pytest.raises(ValidationError):
        validate(credential(**{field: text}))


@pytest.mark.parametrize("field", ["progress", "user_action", "next_step"])
def test_text_of_exactly_500_utf16_units_is_valid(field: str) -> None:
    validate(credential(**{field: "😀" * 250}))
    validate(credential(**{field: "x" * 500}))


def test_additional_fields_are_refused_in_descriptor_and_human_action() -> None:
    with pytest.raises(ValidationError):
        validate(credential(extra="x"))
    data = credential()
    data["human_action"] = {**data["human_action"], "invite": "x"}
    with pytest.raises(ValidationError):
        validate(data)
    with pytest.raises(ValidationError):
        InterventionEnvelope.model_validate({"intervention": credential(), "other": 1})


@pytest.mark.parametrize("value", [False, "true", 1, None])
def test_requires_login_must_be_literal_true(value: Any) -> None:
    data = credential()
    data["human_action"] = {**data["human_action"], "requires_login": value}
    with pytest.raises(ValidationError):
        validate(data)


@pytest.mark.parametrize("url", ["/tasks/x/intervention", "ftp://host/x", "javascript:alert(1)", ""])
def test_human_action_url_must_be_absolute_http(url: str) -> None:
    data = credential()
    data["human_action"] = {**data["human_action"], "url": url}
    with pytest.raises(ValidationError):
        validate(data)


def test_credential_needs_request_id_and_expires_at() -> None:
    for missing in ("request_id", "expires_at"):
        data = credential()
        del data[missing]
        with pytest.raises(ValidationError):
            validate(data)


def test_credential_may_be_credential_saved() -> None:
    validate(credential(state="credential_saved"))


def test_human_control_rules() -> None:
    with pytest.raises(ValidationError):
        validate(human_control(state="credential_saved"))
    with pytest.raises(ValidationError):
        validate(human_control(request_id=REQUEST_ID))
    with pytest.raises(ValidationError):
        validate(human_control(expires_at="2026-10-11T23:00:00.000Z"))


def test_google_connection_rules() -> None:
    with pytest.raises(ValidationError):
        validate(google(request_id=str(uuid.uuid4())))
    with pytest.raises(ValidationError):
        validate(google(state="credential_saved"))
    with pytest.raises(ValidationError):
        validate(google(expires_at="2026-10-11T23:00:00.000Z"))
    data = google()
    del data["request_id"]
    with pytest.raises(ValidationError):
        validate(data)


def test_validation_does_not_mutate_input() -> None:
    data = credential()
    snapshot = copy.deepcopy(data)
    validate(data)
    assert data == snapshot
