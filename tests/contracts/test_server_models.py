"""The server's contract models agree with the shared tables: what they accept
is what the SDKs accept, and what the SDKs refuse as a contract violation they
refuse too."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from runs.contracts import InterventionEnvelope
from tests.contracts.tables import DESCRIPTORS, VISUAL, cases
from visual.contracts import CLIENT_MESSAGE, ServerMessage

SERVER_MESSAGE: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ServerMessage)


@pytest.mark.parametrize("entry", cases(DESCRIPTORS["valid"]))
def test_descriptor_model_accepts_each_valid_descriptor(entry: dict[str, Any]) -> None:
    InterventionEnvelope.model_validate_json(json.dumps(entry["body"]))


@pytest.mark.parametrize("entry", cases([e for e in DESCRIPTORS["invalid"] if e["rule"] == "contract"]))
def test_descriptor_model_refuses_each_contract_violation(entry: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        InterventionEnvelope.model_validate_json(json.dumps(entry["body"]))


@pytest.mark.parametrize("entry", cases([e for e in DESCRIPTORS["invalid"] if e["rule"] == "binding"]))
def test_binding_violations_are_well_formed_descriptors(entry: dict[str, Any]) -> None:
    # Only the harness knows its own origin and run: the model alone cannot refuse these.
    InterventionEnvelope.model_validate_json(json.dumps(entry["body"]))


def test_every_invalid_descriptor_has_a_known_rule() -> None:
    assert {e["rule"] for e in DESCRIPTORS["invalid"]} == {"contract", "binding"}
    names = [e["name"] for e in DESCRIPTORS["valid"] + DESCRIPTORS["invalid"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("entry", cases(VISUAL["client"]["valid"]))
def test_client_message_model_accepts_each_valid_message(entry: dict[str, Any]) -> None:
    CLIENT_MESSAGE.validate_json(json.dumps(entry["message"]))


@pytest.mark.parametrize("entry", cases(VISUAL["client"]["invalid"]))
def test_client_message_model_refuses_each_invalid_message(entry: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        CLIENT_MESSAGE.validate_json(json.dumps(entry["message"]))


@pytest.mark.parametrize("entry", cases(VISUAL["server"]["valid"]))
def test_server_message_models_accept_each_valid_message(entry: dict[str, Any]) -> None:
    SERVER_MESSAGE.validate_json(json.dumps(entry["message"]))


@pytest.mark.parametrize("entry", cases(VISUAL["server"]["invalid"]))
def test_server_message_models_refuse_each_invalid_message(entry: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        SERVER_MESSAGE.validate_json(json.dumps(entry["message"]))
