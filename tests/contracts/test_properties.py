"""Property tests of every contract model: the intervention descriptor, ``required_action``,
the ``jpeg-websocket-v1`` messages and the tool arguments of the registry.

- what the server sends (built through its own constructors and ``to_wire``/``encode``)
  always validates: against the closed models, against the Python SDK's checks that the
  shared tables bind, and with exactly the fields of a valid table entry of its kind;
- what the models accept round-trips (parse -> dump -> parse gives the same);
- UTF-16 limits count astral characters as two units;
- closed objects refuse any extra field, at any depth;
- look-alike types (``True`` or ``1.0`` or ``"1"`` for ``1``) are refused where the spec says exact.

Runs derandomized with modest example counts, so CI sees the same examples every time.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ram_sdk.client import check_intervention
from ram_sdk.visual import check_client_message, check_server_message

from core.contracts import COMPUTER_ID_RE, CREDENTIAL_ID_RE
from executor.contracts import HUMAN_INPUT, NAMED_KEYS
from runs.contracts import (
    REQUIRED_ACTION,
    Budget,
    ConnectionAction,
    ContinueAction,
    CredentialAction,
    Credits,
    CreditsAction,
    HumanAction,
    InterventionDescriptor,
    InterventionEnvelope,
    TakeoverAction,
    Viewer,
)
from runs.tool_calls import ToolCall
from runs.tools import TOOLS
from tests.contracts.tables import DESCRIPTORS, VISUAL
from visual.contracts import (
    CLIENT_MESSAGE,
    CLIENT_MESSAGE_WITH_ADDITIONS,
    CLIENT_MESSAGE_WITH_TABS,
    MAX_SEQUENCE,
    Ack,
    DialogsMessage,
    ErrorMessage,
    FrameMessage,
    Hello,
    PendingAuthPrompt,
    PendingDialog,
    ServerMessage,
    StateHuman,
    StateReleased,
    StateTransition,
    StateUnavailable,
    Tab,
    TabsMessage,
    encode,
)

pytestmark = pytest.mark.unit

PROPERTY = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SERVER_MESSAGE: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ServerMessage)
ORIGIN = DESCRIPTORS["origin"]
REASONS = ["authentication", "captcha", "verification", "missing_information", "authorization_required", "other"]

# --- Strategies ----------------------------------------------------------------------

# Astral characters (outside the BMP): one character, two UTF-16 units.
astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF)
# A text shown to a person: non-blank, and free of links, tickets, keys and Bearer values.
safe_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=":=#"), min_size=1, max_size=80
).filter(lambda s: s.strip() and "bearer" not in s.lower() and "ram_" not in s)
computer_ids = st.from_regex(COMPUTER_ID_RE, fullmatch=True)
credential_ids = st.from_regex(CREDENTIAL_ID_RE, fullmatch=True)
uuids = st.uuids()
# Hypothesis bounds datetimes with naive values and attaches the zone itself.
_FIRST, _LAST = datetime(2000, 1, 1), datetime(2100, 1, 1)  # noqa: DTZ001
moments = st.datetimes(min_value=_FIRST, max_value=_LAST, timezones=st.just(UTC))
hosts = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,2}", fullmatch=True)
http_urls = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}{path}",
    st.sampled_from(["http", "https"]),
    hosts,
    st.from_regex(r"(/[A-Za-z0-9._~%-]{0,12}){0,3}", fullmatch=True),
)
sequences = st.integers(1, MAX_SEQUENCE)
coordinates_x = st.one_of(st.integers(0, 1279), st.floats(0, 1279, allow_nan=False))
coordinates_y = st.one_of(st.integers(0, 719), st.floats(0, 719, allow_nan=False))
deltas = st.one_of(st.integers(-2000, 2000), st.floats(-2000, 2000, allow_nan=False))
selectors = st.text(min_size=1, max_size=40)
keys = st.one_of(st.sampled_from(sorted(NAMED_KEYS)), st.characters(blacklist_categories=("Cs",), max_codepoint=0xFFFF))
tab_ids = st.from_regex(r"t[1-9][0-9]{0,8}", fullmatch=True)
dialog_ids = st.from_regex(r"d[1-9][0-9]{0,8}", fullmatch=True)


def _locator(run_id: uuid.UUID) -> HumanAction:
    return HumanAction(url=f"{ORIGIN}/tasks/{run_id}/intervention", requires_login=True)


@st.composite
def descriptors(draw: st.DrawFn) -> InterventionEnvelope:
    """A descriptor built the way ``runs.selectors.intervention_descriptor`` builds one."""
    run_id = draw(uuids)
    kind = draw(st.sampled_from(["human_control", "credential", "google_connection"]))
    extra: dict[str, Any] = {}
    state = "pending"
    if kind == "credential":
        state = draw(st.sampled_from(["pending", "credential_saved"]))
        extra = {"request_id": draw(uuids), "expires_at": draw(moments)}
    elif kind == "google_connection":
        extra = {"request_id": run_id}
    return InterventionEnvelope(
        intervention=InterventionDescriptor(
            version=1,
            run_id=run_id,
            computer_id=draw(computer_ids),
            kind=kind,
            state=state,
            reason=draw(st.sampled_from(REASONS)),
            progress=draw(safe_text),
            user_action=draw(safe_text),
            next_step=draw(safe_text),
            human_action=_locator(run_id),
            **extra,
        )
    )


def _action_base(draw: st.DrawFn) -> dict[str, Any]:
    del draw
    return {"version": 1, "resume": "explicit_continue"}


@st.composite
def required_actions(draw: st.DrawFn) -> Any:
    """A ``required_action`` built the way the pause kinds (``runs/pauses/``) build one."""
    run_id = draw(uuids)
    base = _action_base(draw)
    kind = draw(st.sampled_from(["takeover", "credential", "connection", "continue", "credits"]))
    if kind == "takeover":
        viewer = draw(
            st.none()
            | st.builds(
                lambda cid: Viewer(computer_id=cid, url=f"{ORIGIN}/computers/{cid}/viewer", requires_login=True),
                computer_ids,
            )
        )
        return TakeoverAction(
            **base, kind="takeover", reason=draw(st.sampled_from(REASONS)), viewer=viewer, human_action=_locator(run_id)
        )
    if kind == "credential":
        return CredentialAction(
            **base,
            kind="credential",
            reason=draw(st.sampled_from(REASONS)),
            request_id=draw(uuids),
            expires_at=draw(moments),
            human_action=_locator(run_id),
        )
    if kind == "connection":
        return ConnectionAction(
            **base,
            kind="connection",
            reason=draw(st.sampled_from(REASONS)),
            provider="google",
            capabilities=draw(
                st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,30}", fullmatch=True), min_size=1, max_size=5)
            ),
            human_action=_locator(run_id),
        )
    if kind == "continue":
        limit = draw(st.integers(1, 10_000))
        used = draw(st.integers(0, limit))
        return ContinueAction(
            **base,
            kind="continue",
            reason=draw(st.sampled_from(["max_model_calls_reached", "idle_timeout"])),
            budget=Budget(model_calls=used, max_model_calls=limit, remaining_model_calls=limit - used),
        )
    required = draw(st.integers(1, 10**24))
    available = draw(st.integers(0, required - 1))
    return CreditsAction(
        **base,
        kind="credits",
        reason="insufficient_credits",
        credits=Credits(
            required_microcredits=str(required),
            available_microcredits=str(available),
            missing_microcredits=str(required - available),
        ),
    )


def _tab() -> st.SearchStrategy[Tab]:
    return st.builds(
        Tab, id=tab_ids, title=st.text(max_size=60), url=http_urls | st.just("about:blank"), active=st.booleans()
    )


def _dialog() -> st.SearchStrategy[PendingDialog]:
    return st.builds(
        PendingDialog,
        id=dialog_ids,
        tab=tab_ids,
        kind=st.sampled_from(["alert", "confirm", "prompt", "beforeunload"]),
        message=st.text(max_size=60),
        default_text=st.text(max_size=20),
    )


def _auth_prompt() -> st.SearchStrategy[PendingAuthPrompt]:
    return st.builds(
        PendingAuthPrompt,
        id=dialog_ids,
        tab=tab_ids,
        kind=st.just("auth"),
        origin=st.from_regex(r"https?://[a-z]{1,12}\.example:[1-9][0-9]{0,4}", fullmatch=True),
        realm=st.text(max_size=60),
    )


server_messages: st.SearchStrategy[Any] = st.one_of(
    st.builds(Hello, mode=st.sampled_from(["observe", "control"]), max_fps=st.integers(1, 10)),
    st.builds(
        FrameMessage,
        sequence=sequences,
        generation=uuids,
        control=st.sampled_from(["available", "leased", "transition", "human"]),
        controlling=st.booleans(),
        url=http_urls | st.just("about:blank"),
    ),
    st.just(StateTransition()),
    st.builds(
        StateHuman,
        stopped_processes=st.integers(0, 10**6),
        cancelled_downloads=st.integers(0, 10**6),
        aborted_exports=st.integers(0, 10**6),
    ),
    st.just(StateReleased()),
    st.just(StateUnavailable()),
    st.builds(Ack, sequence=sequences),
    st.builds(ErrorMessage, message=st.text(min_size=1, max_size=300)),
    st.builds(TabsMessage, tabs=st.lists(_tab(), max_size=20)),
    st.builds(DialogsMessage, dialogs=st.lists(st.one_of(_dialog(), _auth_prompt()), max_size=20)),
)

human_inputs = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("pointer"),
            "phase": st.sampled_from(["move", "down", "up"]),
            "x": coordinates_x,
            "y": coordinates_y,
        },
        optional={"button": st.sampled_from(["left", "middle", "right"])},
    ),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=100)}),
    st.fixed_dictionaries({"type": st.just("key"), "phase": st.sampled_from(["down", "up"]), "key": keys}),
    st.fixed_dictionaries({"type": st.just("wheel"), "delta_x": deltas, "delta_y": deltas}),
    st.fixed_dictionaries({"type": st.just("navigate"), "url": http_urls}),
)
client_messages = st.one_of(
    st.just({"type": "takeover"}),
    st.just({"type": "release"}),
    st.fixed_dictionaries({"type": st.just("input"), "sequence": sequences, "input": human_inputs}),
)
tab_inputs = st.fixed_dictionaries(
    {"type": st.just("tab"), "action": st.sampled_from(["switch", "close"]), "tab": tab_ids}
)
dialog_inputs = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("dialog"), "dialog": dialog_ids, "accept": st.booleans()},
        optional={"text": st.text(max_size=100)},
    ),
    # A site's sign-in prompt: a person's username and password, together.
    st.fixed_dictionaries(
        {
            "type": st.just("dialog"),
            "dialog": dialog_ids,
            "accept": st.just(True),
            "username": st.text(max_size=60),
            "password": st.text(max_size=60),
        }
    ),
)

# One strategy of valid arguments per registered tool.
TOOL_ARGUMENTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "navigate": st.fixed_dictionaries({"url": http_urls}),
    "click": st.one_of(
        st.fixed_dictionaries({"selector": selectors}),
        st.fixed_dictionaries({"x": coordinates_x, "y": coordinates_y}),
    ),
    "type": st.fixed_dictionaries({"selector": selectors, "text": st.text(max_size=100)}),
    "press": st.fixed_dictionaries({"key": keys}),
    "scroll": st.fixed_dictionaries({}, optional={"delta_x": deltas, "delta_y": deltas}),
    "select_option": st.fixed_dictionaries({"selector": selectors}).flatmap(
        lambda base: st.one_of(
            st.fixed_dictionaries({**{k: st.just(v) for k, v in base.items()}, "value": st.text(max_size=100)}),
            st.fixed_dictionaries({**{k: st.just(v) for k, v in base.items()}, "label": st.text(max_size=100)}),
        )
    ),
    "wait_for": st.fixed_dictionaries({"selector": selectors}, optional={"timeout_ms": st.integers(1, 20_000)}),
    "extract_text": st.fixed_dictionaries({}, optional={"selector": selectors}),
    "tabs_list": st.just({}),
    "screenshot": st.just({}),
    "tab_switch": st.fixed_dictionaries({"tab": tab_ids}),
    "tab_close": st.fixed_dictionaries({"tab": tab_ids}),
    "upload": st.fixed_dictionaries({"selector": selectors, "artifact_id": st.uuids().map(str)}),
    "dialog_answer": st.fixed_dictionaries(
        {"accept": st.booleans()}, optional={"text": st.text(max_size=100), "dialog": dialog_ids}
    ),
    "auth_answer": st.one_of(
        st.fixed_dictionaries({"accept": st.just(True), "credentialId": credential_ids}, optional={"dialog": dialog_ids}),
        st.fixed_dictionaries({"accept": st.just(False)}, optional={"dialog": dialog_ids}),
    ),
    "browser_login": st.fixed_dictionaries(
        {"credentialId": credential_ids},
        optional={"usernameSelector": selectors, "passwordSelector": selectors, "submitSelector": selectors},
    ),
    "request_takeover": st.fixed_dictionaries({"reason": st.sampled_from(REASONS)}),
    "request_credential": st.fixed_dictionaries(
        {
            "portal_origin": st.builds(lambda s, h: f"{s}://{h}", st.sampled_from(["http", "https"]), hosts),
            "label": st.text(min_size=1, max_size=60),
        },
        optional={"reason": st.sampled_from(REASONS), "credential_id": credential_ids},
    ),
    "request_connection": st.fixed_dictionaries(
        {"capabilities": st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,30}", fullmatch=True), min_size=1, max_size=20)}
    ),
    "finish": st.fixed_dictionaries(
        {},
        optional={
            "output": st.recursive(
                st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=20),
                lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                max_leaves=8,
            )
        },
    ),
    "fail": st.fixed_dictionaries({"error": st.text(min_size=1, max_size=200)}),
}
tool_calls = st.sampled_from(sorted(TOOL_ARGUMENTS)).flatmap(
    lambda name: TOOL_ARGUMENTS[name].map(lambda arguments: (name, arguments))
)

# --- Helpers ---------------------------------------------------------------------------


def _table_shapes(entries: list[dict[str, Any]], field: str) -> dict[tuple[str, ...], list[set[str]]]:
    shapes: dict[tuple[str, ...], list[set[str]]] = {}
    for entry in entries:
        body = entry[field]
        item = body.get("intervention", body)
        key = (item.get("kind") or item.get("type"), item.get("state") or item.get("control"))
        shapes.setdefault(key, []).append(set(item))
    return shapes


DESCRIPTOR_SHAPES = _table_shapes(DESCRIPTORS["valid"], "body")
SERVER_SHAPES = _table_shapes(VISUAL["server"]["valid"], "message")


def _objects(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every JSON object inside ``value`` (the root included)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        found.append(path)
        for key, item in value.items():
            found += _objects(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _objects(item, (*path, index))
    return found


def _with_extra(value: Any, path: tuple[Any, ...], name: str) -> Any:
    copy = json.loads(json.dumps(value))
    target = copy
    for step in path:
        target = target[step]
    target[name] = "x"
    return copy


def _free_objects(value: Any, exclude: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Object paths that are closed models (not free-form JSON such as a tool's ``output``)."""
    return [p for p in _objects(value) if not any(step in exclude for step in p)]


extra_names = st.text(min_size=1, max_size=12)

# --- What the server sends always validates; what it accepts round-trips ------------------


@PROPERTY
@given(descriptors())
def test_every_descriptor_the_server_builds_validates_and_round_trips(envelope: InterventionEnvelope) -> None:
    wire = envelope.to_wire()
    item = wire["intervention"]
    # The closed model, through JSON as a client reads it.
    parsed = InterventionEnvelope.model_validate_json(json.dumps(wire))
    assert parsed.to_wire() == wire
    assert InterventionEnvelope.model_validate(parsed.to_wire()) == parsed
    # The SDK's check, which the shared table binds to the same verdicts.
    assert check_intervention(wire, run_id=item["run_id"], origin=ORIGIN) == item
    # Exactly the fields of a valid table entry of the same kind and state.
    assert set(item) in DESCRIPTOR_SHAPES[(item["kind"], item["state"])]


@PROPERTY
@given(required_actions())
def test_every_required_action_the_server_builds_validates_and_round_trips(action: Any) -> None:
    wire = action.model_dump(mode="json")
    parsed = REQUIRED_ACTION.validate_json(json.dumps(wire))
    assert type(parsed) is type(action)
    assert parsed.model_dump(mode="json") == wire
    assert REQUIRED_ACTION.validate_python(parsed.model_dump(mode="json")) == parsed


@PROPERTY
@given(server_messages)
def test_every_visual_message_the_server_sends_validates_and_round_trips(message: Any) -> None:
    text = encode(message)
    parsed = SERVER_MESSAGE.validate_json(text)
    assert parsed == message
    assert json.loads(parsed.model_dump_json()) == json.loads(text)
    data = json.loads(text)
    if data["type"] not in ("tabs", "dialogs"):  # the additions reach only clients that ask; the SDK's check is the spec's
        assert check_server_message(data) == data
        shapes = SERVER_SHAPES.get((data["type"], data.get("control")))
        if shapes is None and data["type"] == "frame":  # a frame has the same fields whatever its control
            shapes = [shape for (kind, _), found in SERVER_SHAPES.items() if kind == "frame" for shape in found]
        assert shapes is not None and set(data) in shapes


@PROPERTY
@given(client_messages)
def test_every_valid_client_message_is_accepted_by_server_and_sdk_and_round_trips(message: dict[str, Any]) -> None:
    assert check_client_message(message) == message
    parsed = CLIENT_MESSAGE.validate_json(json.dumps(message))
    dumped = parsed.model_dump(mode="json")
    assert CLIENT_MESSAGE.validate_python(dumped) == parsed
    assert CLIENT_MESSAGE_WITH_TABS.validate_json(json.dumps(message)).model_dump(mode="json") == dumped
    if message["type"] == "input":
        assert HUMAN_INPUT.validate_python(message["input"]).model_dump(mode="json") == dumped["input"]


@PROPERTY
@given(tab_inputs, sequences)
def test_tab_inputs_are_accepted_only_with_the_tabs_addition(tab: dict[str, Any], sequence: int) -> None:
    message = {"type": "input", "sequence": sequence, "input": tab}
    parsed = CLIENT_MESSAGE_WITH_TABS.validate_json(json.dumps(message))
    assert CLIENT_MESSAGE_WITH_TABS.validate_python(parsed.model_dump(mode="json")) == parsed
    with pytest.raises(pydantic.ValidationError):
        CLIENT_MESSAGE.validate_json(json.dumps(message))


@PROPERTY
@given(dialog_inputs, sequences)
def test_dialog_answers_are_accepted_only_with_the_dialogs_addition(dialog: dict[str, Any], sequence: int) -> None:
    message = {"type": "input", "sequence": sequence, "input": dialog}
    parsed = CLIENT_MESSAGE_WITH_ADDITIONS.validate_json(json.dumps(message))
    assert CLIENT_MESSAGE_WITH_ADDITIONS.validate_python(parsed.model_dump(mode="json")) == parsed
    for without in (CLIENT_MESSAGE, CLIENT_MESSAGE_WITH_TABS):
        with pytest.raises(pydantic.ValidationError):
            without.validate_json(json.dumps(message))


def test_every_registered_tool_has_an_argument_strategy() -> None:
    assert set(TOOL_ARGUMENTS) == set(TOOLS)


@PROPERTY
@given(tool_calls)
def test_tool_arguments_validate_and_round_trip(call: tuple[str, dict[str, Any]]) -> None:
    name, arguments = call
    model = TOOLS[name].args
    parsed = model.model_validate_json(json.dumps(arguments))
    assert model.model_validate(parsed.model_dump(mode="json")) == parsed
    assert model.model_validate_json(parsed.model_dump_json()) == parsed
    # The registry's own entry point gives the same arguments.
    assert ToolCall(tool=name, arguments=arguments).parsed() == parsed


# --- Closed objects refuse any extra field ---------------------------------------------


@PROPERTY
@given(descriptors(), st.data())
def test_descriptor_refuses_an_extra_field_anywhere(envelope: InterventionEnvelope, data: st.DataObject) -> None:
    wire = envelope.to_wire()
    path = data.draw(st.sampled_from(_objects(wire)))
    target = wire
    for step in path:
        target = target[step]
    name = data.draw(extra_names.filter(lambda n: n not in target))
    with pytest.raises(pydantic.ValidationError):
        InterventionEnvelope.model_validate_json(json.dumps(_with_extra(wire, path, name)))


@PROPERTY
@given(required_actions(), st.data())
def test_required_action_refuses_an_extra_field_anywhere(action: Any, data: st.DataObject) -> None:
    wire = action.model_dump(mode="json")
    path = data.draw(st.sampled_from(_objects(wire)))
    target = wire
    for step in path:
        target = target[step]
    name = data.draw(extra_names.filter(lambda n: n not in target))
    with pytest.raises(pydantic.ValidationError):
        REQUIRED_ACTION.validate_json(json.dumps(_with_extra(wire, path, name)))


@PROPERTY
@given(server_messages, st.data())
def test_visual_server_messages_refuse_an_extra_field_anywhere(message: Any, data: st.DataObject) -> None:
    wire = json.loads(encode(message))
    path = data.draw(st.sampled_from(_objects(wire)))
    target = wire
    for step in path:
        target = target[step]
    name = data.draw(extra_names.filter(lambda n: n not in target))
    with pytest.raises(pydantic.ValidationError):
        SERVER_MESSAGE.validate_json(json.dumps(_with_extra(wire, path, name)))


@PROPERTY
@given(client_messages, st.data())
def test_visual_client_messages_refuse_an_extra_field_anywhere(message: dict[str, Any], data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_objects(message)))
    target: Any = message
    for step in path:
        target = target[step]
    name = data.draw(extra_names.filter(lambda n: n not in target))
    changed = _with_extra(message, path, name)
    with pytest.raises(pydantic.ValidationError):
        CLIENT_MESSAGE.validate_json(json.dumps(changed))
    with pytest.raises(pydantic.ValidationError):
        CLIENT_MESSAGE_WITH_TABS.validate_json(json.dumps(changed))


@PROPERTY
@given(tool_calls, st.data())
def test_tool_arguments_refuse_an_extra_field(call: tuple[str, dict[str, Any]], data: st.DataObject) -> None:
    name, arguments = call
    path = data.draw(st.sampled_from(_free_objects(arguments, exclude=("output",))))
    target: Any = arguments
    for step in path:
        target = target[step]
    field = data.draw(extra_names.filter(lambda n: n not in target))
    with pytest.raises(pydantic.ValidationError):
        TOOLS[name].args.model_validate_json(json.dumps(_with_extra(arguments, path, field)))
    with pytest.raises(pydantic.ValidationError):
        ToolCall(tool=name, arguments=_with_extra(arguments, path, field))


# --- UTF-16 limits on astral characters ----------------------------------------------------


@PROPERTY
@given(
    st.lists(astral, min_size=240, max_size=260),
    st.text(alphabet="abc ", max_size=3),
    st.sampled_from(["progress", "user_action", "next_step"]),
)
def test_descriptor_texts_count_utf16_units(chars: list[str], tail: str, field: str) -> None:
    wire = dict(DESCRIPTORS["valid"][0]["body"]["intervention"])
    wire[field] = "".join(chars) + tail
    if 2 * len(chars) + len(tail) <= 500:
        InterventionDescriptor.model_validate_json(json.dumps(wire))
    else:
        with pytest.raises(pydantic.ValidationError):
            InterventionDescriptor.model_validate_json(json.dumps(wire))


def test_descriptor_text_limit_is_250_emoji_not_251() -> None:
    wire = dict(DESCRIPTORS["valid"][0]["body"]["intervention"])
    InterventionDescriptor.model_validate({**wire, "progress": "😀" * 250})
    InterventionDescriptor.model_validate({**wire, "progress": "😀" * 249 + "ab"})
    with pytest.raises(pydantic.ValidationError):
        InterventionDescriptor.model_validate({**wire, "progress": "😀" * 251})
    with pytest.raises(pydantic.ValidationError):
        InterventionDescriptor.model_validate({**wire, "progress": "😀" * 250 + "a"})


@PROPERTY
@given(st.integers(1995, 2005), astral, sequences)
def test_text_input_limit_is_4000_utf16_units(count: int, char: str, sequence: int) -> None:
    message = {"type": "input", "sequence": sequence, "input": {"type": "text", "text": char * count}}
    if count <= 2000:
        CLIENT_MESSAGE.validate_json(json.dumps(message))
        TOOLS["type"].args.model_validate({"selector": "#q", "text": char * count})
        check_client_message(message)
    else:
        with pytest.raises(pydantic.ValidationError):
            CLIENT_MESSAGE.validate_json(json.dumps(message))
        with pytest.raises(pydantic.ValidationError):
            TOOLS["type"].args.model_validate({"selector": "#q", "text": char * count})


@PROPERTY
@given(astral, st.sampled_from(["down", "up"]))
def test_a_key_is_one_utf16_unit_so_an_astral_character_is_refused(char: str, phase: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        HUMAN_INPUT.validate_python({"type": "key", "phase": phase, "key": char})
    with pytest.raises(pydantic.ValidationError):
        TOOLS["press"].args.model_validate({"key": char})


# --- Look-alike types are refused where the spec says exact ------------------------------

look_alikes_of_one = st.sampled_from([True, 1.0, "1"])


@PROPERTY
@given(descriptors(), look_alikes_of_one)
def test_descriptor_version_must_be_exactly_1(envelope: InterventionEnvelope, fake: Any) -> None:
    wire = envelope.to_wire()
    wire["intervention"]["version"] = fake
    with pytest.raises(pydantic.ValidationError):
        InterventionEnvelope.model_validate_json(json.dumps(wire))


@PROPERTY
@given(descriptors(), st.sampled_from([1, "true", 1.0]))
def test_descriptor_requires_login_must_be_exactly_true(envelope: InterventionEnvelope, fake: Any) -> None:
    wire = envelope.to_wire()
    wire["intervention"]["human_action"]["requires_login"] = fake
    with pytest.raises(pydantic.ValidationError):
        InterventionEnvelope.model_validate_json(json.dumps(wire))


@PROPERTY
@given(required_actions(), look_alikes_of_one, st.sampled_from([1, "true", 1.0]))
def test_required_action_version_and_requires_login_are_exact(action: Any, fake_one: Any, fake_true: Any) -> None:
    wire = action.model_dump(mode="json")
    with pytest.raises(pydantic.ValidationError):
        REQUIRED_ACTION.validate_json(json.dumps({**wire, "version": fake_one}))
    if "human_action" in wire:
        changed = {**wire, "human_action": {**wire["human_action"], "requires_login": fake_true}}
        with pytest.raises(pydantic.ValidationError):
            REQUIRED_ACTION.validate_json(json.dumps(changed))


@PROPERTY
@given(client_messages.filter(lambda m: m["type"] == "input"), look_alikes_of_one)
def test_input_sequence_must_be_an_integer(message: dict[str, Any], fake: Any) -> None:
    changed = {**message, "sequence": fake}
    with pytest.raises(pydantic.ValidationError):
        CLIENT_MESSAGE.validate_json(json.dumps(changed))


@PROPERTY
@given(
    st.sampled_from(["pointer", "wheel"]),
    st.sampled_from([True, False, "1", "0", None]),
)
def test_input_coordinates_refuse_booleans_strings_and_null(kind: str, fake: Any) -> None:
    fields = {"pointer": {"phase": "move", "x": 1, "y": 1}, "wheel": {"delta_x": 1, "delta_y": 1}}[kind]
    for name in [n for n in fields if n != "phase"]:
        with pytest.raises(pydantic.ValidationError):
            HUMAN_INPUT.validate_json(json.dumps({"type": kind, **fields, name: fake}))


@PROPERTY
@given(look_alikes_of_one, st.sampled_from(["observe", "control"]))
def test_hello_fields_are_exact(fake: Any, mode: str) -> None:
    wire = json.loads(encode(Hello(mode=mode, max_fps=1)))
    for name in ("version", "max_fps"):
        with pytest.raises(pydantic.ValidationError):
            SERVER_MESSAGE.validate_json(json.dumps({**wire, name: fake}))


@PROPERTY
@given(st.sampled_from([1, 0, "true", 1.0]))
def test_frame_controlling_is_a_boolean(fake: Any) -> None:
    frame = FrameMessage(sequence=1, generation=uuid.uuid4(), control="available", controlling=False, url="about:blank")
    wire = json.loads(encode(frame))
    with pytest.raises(pydantic.ValidationError):
        SERVER_MESSAGE.validate_json(json.dumps({**wire, "controlling": fake}))


@PROPERTY
@given(st.sampled_from([True, "1", "1.0", 1.5]))
def test_wait_for_timeout_is_an_integer(fake: Any) -> None:
    # 1.0 is the integer 1 in JSON (and to the published schema's "integer"): accepted, as 1.
    with pytest.raises(pydantic.ValidationError):
        TOOLS["wait_for"].args.model_validate_json(json.dumps({"selector": "#q", "timeout_ms": fake}))


@PROPERTY
@given(st.sampled_from([True, "1", None]), st.sampled_from(["click", "scroll"]))
def test_tool_coordinates_refuse_booleans_and_strings(fake: Any, tool: str) -> None:
    arguments = {"click": {"x": fake, "y": 1}, "scroll": {"delta_x": fake}}[tool]
    if fake is None and tool == "scroll":
        arguments = {"delta_x": "1"}
    with pytest.raises(pydantic.ValidationError):
        TOOLS[tool].args.model_validate_json(json.dumps(arguments))
