"""The proof's WebSocket fuzzer: what it sends as valid is valid, what it sends as invalid the gateway
must refuse (the contract refuses it, or the session's state does), so its table row means what it says."""

from __future__ import annotations

import json
import random

import pydantic
import pytest

from proof.hostile import invalid_message, valid_input
from visual.contracts import CLIENT_MESSAGE, InputMessage, Release, Takeover
from visual.limits import MAX_CONTROL_MESSAGE_BYTES

pytestmark = pytest.mark.unit


def test_every_valid_input_passes_the_gateways_contract() -> None:
    r = random.Random(1)
    for sequence in range(1, 2001):
        message = CLIENT_MESSAGE.validate_json(json.dumps({"type": "input", "sequence": sequence, "input": valid_input(r)}))
        assert isinstance(message, InputMessage)
        assert message.input.type != "navigate"  # nothing the fuzzer sends leaves the page


@pytest.mark.parametrize(("mode", "holding"), [("observe", False), ("control", False), ("control", True)])
def test_every_invalid_message_is_refused_by_the_contract_or_by_the_sessions_state(mode: str, holding: bool) -> None:
    r = random.Random(2)
    kinds = set()
    for _ in range(3000):
        last = r.randint(0, 5) if holding else 0
        bad = invalid_message(r, last, mode, holding)
        kinds.add(bad.what)
        if isinstance(bad.payload, bytes) or len(bad.payload.encode()) > MAX_CONTROL_MESSAGE_BYTES:
            continue  # a binary message, or one the server's ws_max_size closes with 1009
        try:
            message = CLIENT_MESSAGE.validate_json(bad.payload)
        except pydantic.ValidationError:
            continue
        # Well-formed: then the session's state refuses it.
        if isinstance(message, InputMessage):
            assert not holding or message.sequence <= last, bad
        elif isinstance(message, Takeover):
            assert mode == "observe" or holding, bad
        else:
            assert isinstance(message, Release) and not holding, bad
    assert len(kinds) >= 20
