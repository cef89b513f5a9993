"""The operations of the executor's private interface: one registry both sides read.

The link is the gateway→executor and worker→executor link (``computers/client.py`` speaks it,
``executor/rpc.py`` serves it and ``executor/handlers.py`` answers; the envelope is in
``executor/wire.py``). The other link, the executor→server link of ``executor/server_link.py``,
is not this one.

Each operation is one ``Op``: its name, the model of its arguments and the model of its reply
(both closed: an unknown or missing field, a wrong type, fails). The executor validates the
arguments before its handler runs and the reply before it is sent; the server's client validates
the arguments before sending and the reply when it arrives. The ``agent`` operation's reply
depends on its action: ``ACTION_REPLIES`` holds one model per agent action, read by the tools'
result functions (``runs/tools.py``). Every reason a refusal may carry is in ``FailureReason``.

This module imports no Django and no Playwright: the browser process has no settings, and the
server reads it too (an import contract in pyproject.toml says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import pydantic
from pydantic import Field, StringConstraints

from core.contracts import Closed
from executor.contracts import PersonInput, Selector

# --- Why an operation was refused -----------------------------------------------

FailureReason = Literal[
    # The request itself: unknown operation, arguments that do not match the operation's model.
    "bad_request",
    # The executor's reply did not match the operation's reply model (a defect of one side).
    "bad_reply",
    "timeout",
    # The executor (or its browser) cannot be reached or was lost.
    "unavailable",
    "browser_error",
    "refused",
    # The control grant state machine (executor/control.py).
    "human_control",
    "leased",
    "lease_invalid",
    "grant_invalid",
    "not_holding",
    # Pages and dialogs.
    "tab_not_found",
    "dialog_not_found",
    "dialog_open",
    # The network policy (executor/egress.py) and the upstream proxy.
    "egress_refused",
    "upstream_proxy_failed",
    # Secrets the browser holds (executor/taint.py).
    "selector_value_dependent",
    "secret_in_arguments",
    "secret_field_focused",
    # A <select> with no option of the value or label asked for (select_option).
    "option_not_found",
    # The run's files and binding.
    "artifact_not_found",
    "binding_changed",
    # The server's client: another generation answers at the executor's address.
    "generation_changed",
]
FAILURE_REASONS: frozenset[str] = frozenset(get_args(FailureReason))


def failure_reason(value: object) -> FailureReason:
    """A reason read from the wire: one of ``FailureReason``, else ``bad_reply`` (never a new word)."""
    return value if isinstance(value, str) and value in FAILURE_REASONS else "bad_reply"  # type: ignore[return-value]


StrictInt = Annotated[int, Field(strict=True)]
StrictStr = Annotated[str, Field(strict=True)]
# A JSON number (an integer too), never a numeric string.
StrictFloat = Annotated[float, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]
ControlState = Literal["available", "leased", "transition", "human", "released", "unavailable"]


# --- What replies describe: open tabs, waiting dialogs, finished downloads, answers ---------
# Built by their own modules (executor/tabs.py, executor/dialogs.py, executor/downloads.py,
# executor/pages.py, executor/login_codes.py); closed, so a renamed key fails on both sides.


class TabInfo(Closed):
    """An open page: its id, title and address (bounded by executor/tabs.py), the active one."""

    id: StrictStr
    title: StrictStr
    url: StrictStr
    active: StrictBool


class ScriptDialogInfo(Closed):
    """A JavaScript dialog that blocks its page until it is answered."""

    id: StrictStr
    tab: StrictStr
    kind: Literal["alert", "confirm", "prompt", "beforeunload"]
    message: StrictStr
    default_text: StrictStr
    opened_at: StrictFloat


class AuthDialogInfo(Closed):
    """A site's HTTP sign-in prompt: the origin that asks and the realm it gave."""

    id: StrictStr
    tab: StrictStr
    kind: Literal["auth"]
    origin: StrictStr
    realm: StrictStr
    opened_at: StrictFloat


DialogInfo = Annotated[ScriptDialogInfo | AuthDialogInfo, Field(discriminator="kind")]


class StoredDownload(Closed):
    outcome: Literal["stored"]
    artifact_id: StrictStr
    filename: StrictStr
    content_type: StrictStr
    size: StrictInt
    sha256: StrictStr


class RefusedDownload(Closed):
    outcome: Literal["refused"]
    filename: StrictStr
    size: StrictInt
    reason: Literal["too_large"]


class LostDownload(Closed):
    outcome: Literal["cancelled", "failed"]
    filename: StrictStr


DownloadInfo = Annotated[StoredDownload | RefusedDownload | LostDownload, Field(discriminator="outcome")]


class DialogAnswered(Closed):
    """What ``dialog_answer`` did: the dialog, its tab and kind, accepted or dismissed."""

    dialog: StrictStr
    tab: StrictStr
    kind: StrictStr
    accepted: StrictBool


class AuthAnswered(DialogAnswered):
    """What ``auth_answer`` did, and what the site did next (executor/pages.py ``auth_answer``)."""

    outcome: Literal["signed_in", "sent", "cancelled", "asked_again", "dialog"]
    url: StrictStr
    origin: StrictStr
    # Masked (executor/taint.py ``mask_username``); absent when the prompt was cancelled.
    username: StrictStr | None = None


class LoginToolResult(Closed):
    """A login's (or a refused sign-in answer's) tool result, as executor/login.py and
    executor/login_codes.py build it; the server reads it as its ``ToolResult``."""

    content: StrictStr
    isError: StrictBool  # noqa: N815
    code: StrictStr | None = None
    category: Literal["unprocessable"] | None = None
    artifact_id: StrictStr | None = None


# --- Arguments -----------------------------------------------------------------------


class NoArgs(Closed):
    pass


class ObserveArgs(Closed):
    max_chars: Annotated[int, Field(strict=True, ge=1, le=100_000)]


class ArgumentsCheckArgs(Closed):
    # A step's secret-free summary, before the server records it (any JSON object).
    values: dict[str, Any]


class SubscribeArgs(Closed):
    max_fps: Annotated[int, Field(strict=True, ge=1, le=30)]


class RecordingStartArgs(Closed):
    """Record the screen for a run (``executor/recording.py``; the server's ``computers.recordings``)."""

    recording_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]
    fps: Annotated[int, Field(strict=True, ge=1, le=10)]
    record_human: StrictBool
    segment_seconds: Annotated[float, Field(ge=1, le=600)]
    max_seconds: Annotated[float, Field(ge=1, le=86_400)]
    max_bytes: Annotated[int, Field(strict=True, ge=1)]


class RecordingStopArgs(Closed):
    recording_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]


class RecordingReply(Closed):
    """``started``/``stopped``: whether this call changed anything (a repeat changes nothing)."""

    changed: StrictBool


class GrantArgs(Closed):
    grant_id: StrictStr


class InputArgs(Closed):
    grant_id: StrictStr
    input: PersonInput


class LeaseArgs(Closed):
    lease_id: StrictStr


class AgentArgs(Closed):
    lease_id: StrictStr
    # The action's own arguments and context are validated by its models (executor/actions.py).
    action: StrictStr
    args: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] | None = None


# --- Replies --------------------------------------------------------------------------


class Viewport(Closed):
    width: StrictInt
    height: StrictInt


class HelloReply(Closed):
    computer_id: StrictStr
    generation: StrictStr
    control: ControlState
    viewport: Viewport


class StatusReply(Closed):
    generation: StrictStr
    control: ControlState
    url: StrictStr
    tabs: list[TabInfo]
    dialogs: list[DialogInfo]
    subscribers: StrictInt
    screencasting: StrictBool
    raw_frames: StrictInt
    screencast_refreshes: StrictInt
    inputs: StrictInt


class ObserveReply(Closed):
    url: StrictStr
    title: StrictStr
    text: StrictStr
    truncated: StrictBool
    control: ControlState
    tabs: list[TabInfo]
    dialogs: list[DialogInfo]


class ArgumentsCheckReply(Closed):
    carries_secret: StrictBool


class TabsReply(Closed):
    tabs: list[TabInfo]


class DialogsReply(Closed):
    dialogs: list[DialogInfo]


class EmptyReply(Closed):
    pass


class TakeoverReply(Closed):
    grant_id: StrictStr
    version: StrictInt
    expires_in: StrictFloat
    stopped_processes: StrictInt
    cancelled_downloads: StrictInt
    aborted_exports: StrictInt


class ExpiresReply(Closed):
    expires_in: StrictFloat


class LeaseAcquireReply(Closed):
    lease_id: StrictStr
    expires_in: StrictFloat


# --- The agent's actions' replies ----------------------------------------------------


class ActionReply(Closed):
    """What every agent action's reply may carry besides its own fields: the downloads the step
    finished (``downloads`` in docs/api.md), absent when there were none."""

    downloads: list[DownloadInfo] = Field(default_factory=list)


class DialogOpenedReply(ActionReply):
    """The action's effect happened and the page opened a dialog (its own result never came)."""

    url: StrictStr
    dialog_opened: DialogInfo


class DoneReply(ActionReply):
    pass


class PageReply(ActionReply):
    url: StrictStr


class NavigateReply(ActionReply):
    url: StrictStr
    title: StrictStr


class ExtractTextReply(ActionReply):
    text: StrictStr
    truncated: StrictBool
    url: StrictStr


class ScreenshotReply(ActionReply):
    artifact_id: StrictStr
    url: StrictStr


class ScrollReply(ActionReply):
    url: StrictStr
    # As the page reports them: whole pixels stay integers.
    scroll_x: StrictInt | StrictFloat
    scroll_y: StrictInt | StrictFloat


class TabsActionReply(ActionReply):
    tabs: list[TabInfo]


class UploadReply(ActionReply):
    url: StrictStr
    artifact_id: StrictStr
    filename: StrictStr
    content_type: StrictStr
    size: StrictInt


class DialogAnswerReply(ActionReply):
    answered: DialogAnswered
    dialogs: list[DialogInfo]


class AuthAnswerReply(ActionReply):
    """Answered (``answered``, ``dialogs``), or refused before anything was sent (``tool_result``)."""

    answered: AuthAnswered | None = None
    dialogs: list[DialogInfo] | None = None
    tool_result: LoginToolResult | None = None

    @pydantic.model_validator(mode="after")
    def _one_kind(self) -> AuthAnswerReply:
        if (self.tool_result is None) == (self.answered is None or self.dialogs is None):
            raise ValueError("an auth_answer reply is either answered and dialogs, or tool_result")
        return self


class LoginReply(ActionReply):
    tool_result: LoginToolResult


# An agent action may declare both its models here, its argument model beside its reply model (the
# agent tool's ``args`` in ``runs/tools.py`` is that model, as for the actions of executor/contracts.py).

MAX_OPTION_LENGTH = 1000
OptionText = Annotated[str, Field(strict=True), StringConstraints(max_length=MAX_OPTION_LENGTH)]


class SelectOptionArgs(Closed):
    """Choose the option of a ``<select>`` whose value (or whose visible label) is exactly this."""

    model_config = pydantic.ConfigDict(
        **Closed.model_config,
        json_schema_extra={
            # Exactly one of the two, as a string (the other absent or null).
            "anyOf": [
                {"required": ["value"], "properties": {"value": {"type": "string"}, "label": {"type": "null"}}},
                {"required": ["label"], "properties": {"label": {"type": "string"}, "value": {"type": "null"}}},
            ]
        },
    )

    selector: Selector
    value: OptionText | None = None
    label: OptionText | None = None

    @pydantic.model_validator(mode="after")
    def _value_or_label(self) -> SelectOptionArgs:
        if (self.value is None) == (self.label is None):
            raise ValueError("give either value or label")
        return self


class SelectOptionReply(ActionReply):
    """The option the ``<select>`` now shows: its value and its label."""

    url: StrictStr
    value: StrictStr
    label: StrictStr


ACTION_REPLIES: dict[str, type[ActionReply]] = {
    "navigate": NavigateReply,
    "click": PageReply,
    "type": DoneReply,
    "press": PageReply,
    "wait_for": DoneReply,
    "extract_text": ExtractTextReply,
    "screenshot": ScreenshotReply,
    "scroll": ScrollReply,
    "tabs_list": TabsActionReply,
    "tab_switch": TabsActionReply,
    "tab_close": TabsActionReply,
    "upload": UploadReply,
    "dialog_answer": DialogAnswerReply,
    "auth_answer": AuthAnswerReply,
    "browser_login": LoginReply,
    "select_option": SelectOptionReply,
}


def action_reply(action: str, result: Any) -> ActionReply:
    """The reply of agent action ``action`` validated into its model (``DialogOpenedReply`` when the
    page opened a dialog instead); a ``pydantic.ValidationError`` when it does not match."""
    if isinstance(result, dict) and "dialog_opened" in result:
        return DialogOpenedReply.model_validate(result)
    model = ACTION_REPLIES.get(action)
    if model is None:
        raise KeyError(action)
    return model.model_validate(result)


# --- What the executor pushes to the gateway's screen links, unasked -------------------
# (executor/pages.py, executor/runtime.py, executor/feed.py send them; computers/client.py
# ``GatewayToExecutorLink`` reads them for visual/consumers.py.)


class ControlEvent(Closed):
    event: Literal["control"]
    control: ControlState
    version: StrictInt


class TabsEvent(Closed):
    event: Literal["tabs"]
    tabs: list[TabInfo]


class DialogsEvent(Closed):
    event: Literal["dialogs"]
    dialogs: list[DialogInfo]


PushedEvent = ControlEvent | TabsEvent | DialogsEvent
PUSHED_EVENT: pydantic.TypeAdapter[PushedEvent] = pydantic.TypeAdapter(
    Annotated[PushedEvent, Field(discriminator="event")]
)


def pushed(event: PushedEvent) -> str:
    """The event as the JSON text message the executor pushes (validated when it was built)."""
    return event.model_dump_json()


class FrameMeta(Closed):
    """The metadata before each screen frame's JPEG (executor/wire.py ``pack_frame``)."""

    url: StrictStr
    control: ControlState
    captured_at: StrictFloat
    width: StrictInt
    height: StrictInt


# --- The registry -------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    name: str
    args: type[Closed]
    # ``None``: the reply depends on the arguments (the ``agent`` operation: ``action_reply``).
    reply: type[Closed] | None
    # Who calls it: the gateway's screen link, the workers, or both.
    callers: tuple[Literal["gateway", "worker"], ...]

    def reply_for(self, args: Closed, result: Any) -> Closed:
        """``result`` validated into this operation's reply model (for these arguments)."""
        if self.reply is not None:
            return self.reply.model_validate(result)
        if not isinstance(args, AgentArgs):
            raise TypeError(f"{self.name} declares no reply model")
        return action_reply(args.action, result)


OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("hello", NoArgs, HelloReply, ("gateway", "worker")),
        Op("status", NoArgs, StatusReply, ("worker",)),
        Op("observe", ObserveArgs, ObserveReply, ("worker",)),
        Op("arguments_check", ArgumentsCheckArgs, ArgumentsCheckReply, ("worker",)),
        Op("tabs", NoArgs, TabsReply, ("gateway",)),
        Op("dialogs", NoArgs, DialogsReply, ("gateway",)),
        Op("subscribe", SubscribeArgs, EmptyReply, ("gateway",)),
        Op("unsubscribe", NoArgs, EmptyReply, ("gateway",)),
        Op("takeover", NoArgs, TakeoverReply, ("gateway",)),
        Op("grant_renew", GrantArgs, ExpiresReply, ("gateway",)),
        Op("grant_release", GrantArgs, EmptyReply, ("gateway",)),
        Op("input", InputArgs, EmptyReply, ("gateway",)),
        Op("lease_acquire", NoArgs, LeaseAcquireReply, ("worker",)),
        Op("lease_renew", LeaseArgs, ExpiresReply, ("worker",)),
        Op("lease_release", LeaseArgs, EmptyReply, ("worker",)),
        Op("agent", AgentArgs, None, ("worker",)),
        Op("recording_start", RecordingStartArgs, RecordingReply, ("worker",)),
        Op("recording_stop", RecordingStopArgs, RecordingReply, ("worker",)),
    )
}


class OpRefused(Exception):
    """A request that names no operation, or whose arguments do not match its model."""

    reason: FailureReason = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def where(error: pydantic.ValidationError) -> str:
    """The fields a validation error names, never the values (an input may carry a typed secret)."""
    places = sorted({".".join(str(part) for part in e["loc"]) or "(the whole)" for e in error.errors()})
    return ", ".join(places[:5])


def op_args(name: object, args: object) -> tuple[Op, Closed]:
    """The operation ``name`` and its arguments, validated; ``OpRefused`` otherwise."""
    op = OPS.get(name) if isinstance(name, str) else None
    if op is None:
        raise OpRefused(f"Unknown operation {str(name)[:40]!r}.")
    try:
        return op, op.args.model_validate(args if args is not None else {})
    except pydantic.ValidationError as exc:
        raise OpRefused(f"Invalid arguments for {op.name}: {where(exc)}.") from None
