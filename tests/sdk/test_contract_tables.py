"""The Python SDK refuses exactly what the shared tables (tests/contracts/*.json)
say: the same tables run in the TypeScript SDK's tests and against the server's
contract models."""

from __future__ import annotations

from typing import Any

import pytest
from ram_sdk import (
    ControlError,
    InvalidDescriptor,
    VisualError,
    check_client_message,
    check_intervention,
    check_server_message,
)

from tests.contracts.tables import DESCRIPTORS, VISUAL, cases

ORIGIN, RUN_ID = DESCRIPTORS["origin"], DESCRIPTORS["run_id"]


@pytest.mark.parametrize("entry", cases(DESCRIPTORS["valid"]))
def test_sdk_accepts_each_valid_descriptor(entry: dict[str, Any]) -> None:
    assert check_intervention(entry["body"], run_id=RUN_ID, origin=ORIGIN) == entry["body"]["intervention"]


@pytest.mark.parametrize("entry", cases(DESCRIPTORS["invalid"]))
def test_sdk_refuses_each_invalid_descriptor(entry: dict[str, Any]) -> None:
    with pytest.raises(InvalidDescriptor):
        check_intervention(entry["body"], run_id=RUN_ID, origin=ORIGIN)


@pytest.mark.parametrize("entry", cases(VISUAL["client"]["valid"]))
def test_sdk_accepts_each_valid_client_message(entry: dict[str, Any]) -> None:
    assert check_client_message(entry["message"]) == entry["message"]


@pytest.mark.parametrize("entry", cases(VISUAL["client"]["invalid"]))
def test_sdk_refuses_each_invalid_client_message(entry: dict[str, Any]) -> None:
    with pytest.raises(ControlError):
        check_client_message(entry["message"])


@pytest.mark.parametrize("entry", cases(VISUAL["server"]["valid"]))
def test_sdk_accepts_each_valid_server_message(entry: dict[str, Any]) -> None:
    assert check_server_message(entry["message"]) == entry["message"]


@pytest.mark.parametrize("entry", cases(VISUAL["server"]["invalid"]))
def test_sdk_refuses_each_invalid_server_message(entry: dict[str, Any]) -> None:
    with pytest.raises(VisualError):
        check_server_message(entry["message"])
