"""Wire contracts of ``jpeg-websocket-v1``: the HTTP session creation and every
WebSocket message in both directions. Closed models; every outgoing message is
built through one of these and validated before it leaves."""

from __future__ import annotations

import uuid
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from core.contracts import COMPUTER_ID_RE, VersionOne
from executor.contracts import (
    DialogId,
    DialogInput,
    KeyInput,
    NavigateInput,
    PointerInput,
    TabId,
    TabInput,
    TextInput,
    WheelInput,
)

TRANSPORT: Final = "jpeg-websocket-v1"
SUBPROTOCOL: Final = "ram-jpeg-v1"
TICKET_PROTOCOL_PREFIX: Final = "ram-ticket."
# A documented addition: a client that also offers this subprotocol gets ``tabs`` messages
# and may send ``tab`` inputs. The server still selects only ``ram-jpeg-v1``; a client that
# does not offer it sees exactly the spec's messages.
TABS_PROTOCOL: Final = "ram-tabs-v1"
MAX_TABS_LISTED = 20
# A second addition, the same way: ``dialogs`` messages and ``dialog`` inputs (answers).
DIALOGS_PROTOCOL: Final = "ram-dialogs-v1"
MAX_DIALOGS_LISTED = 20
# A third: ``notice`` messages, which explain and end nothing (a navigation that failed but
# was acked, a link too slow for the page); a client without it gets the spec's messages only.
NOTICES_PROTOCOL: Final = "ram-notices-v1"
WEBSOCKET_PATH: Final = "/api/visual/stream"
CONNECT_EXPIRES_IN_SECONDS: Final = 60
SESSION_MAX_SECONDS: Final = 900
MAX_SEQUENCE = 9_007_199_254_740_991

Mode = Literal["observe", "control"]
FrameControl = Literal["available", "leased", "transition", "human"]
Fps = Annotated[int, Field(strict=True, ge=1, le=10)]
NonNegative = Annotated[int, Field(strict=True, ge=0)]
Positive = Annotated[int, Field(strict=True, ge=1, le=MAX_SEQUENCE)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Viewport(Closed):
    width: Literal[1280] = 1280
    height: Literal[720] = 720


# --- HTTP: POST /api/visual/sessions ----------------------------------------


class VisualSessionIn(Closed):
    computer_id: Annotated[
        str, Field(strict=True), StringConstraints(pattern=COMPUTER_ID_RE, min_length=1, max_length=128)
    ]
    mode: Mode
    transport: Literal["jpeg-websocket-v1"]


class VisualSessionOut(Closed):
    """The visual session and its single-use ticket (shown once)."""

    version: VersionOne
    transport: Literal["jpeg-websocket-v1"]
    session_id: uuid.UUID
    ticket: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{43}$")]
    websocket_path: Literal["/api/visual/stream"]
    subprotocol: Literal["ram-jpeg-v1"]
    ticket_protocol_prefix: Literal["ram-ticket."]
    connect_expires_in_seconds: Literal[60]
    session_max_seconds: Literal[900]
    max_fps: Fps
    viewport: Viewport
    mode: Mode


# --- WebSocket: server -> client ---------------------------------------------


class Hello(Closed):
    type: Literal["hello"] = "hello"
    version: VersionOne = 1
    transport: Literal["jpeg-websocket-v1"] = TRANSPORT
    mode: Mode
    max_fps: Fps
    viewport: Viewport = Viewport()


class FrameMessage(Closed):
    type: Literal["frame"] = "frame"
    sequence: Positive
    generation: uuid.UUID
    mime_type: Literal["image/jpeg"] = "image/jpeg"
    width: Literal[1280] = 1280
    height: Literal[720] = 720
    control: FrameControl
    controlling: Annotated[bool, Field(strict=True)]
    url: Annotated[str, Field(strict=True)]


class StateTransition(Closed):
    type: Literal["state"] = "state"
    control: Literal["transition"] = "transition"


class StateHuman(Closed):
    type: Literal["state"] = "state"
    control: Literal["human"] = "human"
    controlling: Literal[True] = True
    stopped_processes: NonNegative
    cancelled_downloads: NonNegative
    aborted_exports: NonNegative


class StateReleased(Closed):
    type: Literal["state"] = "state"
    control: Literal["released"] = "released"
    controlling: Literal[False] = False


class StateUnavailable(Closed):
    type: Literal["state"] = "state"
    control: Literal["unavailable"] = "unavailable"
    controlling: Literal[False] = False


class Ack(Closed):
    type: Literal["ack"] = "ack"
    sequence: Positive


class ErrorMessage(Closed):
    type: Literal["error"] = "error"
    message: Annotated[str, StringConstraints(min_length=1, max_length=300)]


class Tab(Closed):
    id: TabId
    title: Annotated[str, Field(strict=True), StringConstraints(max_length=300)]
    url: Annotated[str, Field(strict=True), StringConstraints(max_length=4096)]
    active: Annotated[bool, Field(strict=True)]


class TabsMessage(Closed):
    """The computer's open pages; the ``active`` one is what the frames show (``ram-tabs-v1`` only)."""

    type: Literal["tabs"] = "tabs"
    tabs: Annotated[list[Tab], Field(max_length=MAX_TABS_LISTED)]


class PendingDialog(Closed):
    """A JavaScript dialog a page opened, blocking it until it is answered."""

    id: DialogId
    tab: TabId
    kind: Literal["alert", "confirm", "prompt", "beforeunload"]
    message: Annotated[str, Field(strict=True), StringConstraints(max_length=1000)]
    default_text: Annotated[str, Field(strict=True), StringConstraints(max_length=1000)]


class PendingAuthPrompt(Closed):
    """A site's HTTP sign-in prompt (basic auth): ``origin`` asks (``scheme://host:port`` as the browser
    reports it); ``realm`` is the site's own text. Answered with a username and password, or cancelled."""

    id: DialogId
    tab: TabId
    kind: Literal["auth"]
    origin: Annotated[str, Field(strict=True), StringConstraints(min_length=1, max_length=300)]
    realm: Annotated[str, Field(strict=True), StringConstraints(max_length=200)]


WaitingDialog = Annotated[PendingDialog | PendingAuthPrompt, Field(discriminator="kind")]
WAITING_DIALOG: TypeAdapter[PendingDialog | PendingAuthPrompt] = TypeAdapter(WaitingDialog)


class DialogsMessage(Closed):
    """The dialogs (and sign-in prompts) waiting for an answer, oldest first; empty once all are
    answered (``ram-dialogs-v1`` only)."""

    type: Literal["dialogs"] = "dialogs"
    dialogs: Annotated[list[WaitingDialog], Field(max_length=MAX_DIALOGS_LISTED)]


class NoticeMessage(Closed):
    """Something the person should know that ends nothing (``ram-notices-v1`` only).

    ``navigation_failed``: the ``navigate`` input ``sequence`` was acked, but its page did not
    load (timed out, refused by the egress policy, failed); the person keeps control.
    ``slow_link``: frames wait seconds for this socket (the link is too slow for the page;
    the screen updates rarely); ``link_ok``: they leave promptly again.
    """

    type: Literal["notice"] = "notice"
    code: Literal["navigation_failed", "slow_link", "link_ok"]
    message: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    sequence: Positive | None = None


ServerMessage = (
    Hello
    | FrameMessage
    | StateTransition
    | StateHuman
    | StateReleased
    | StateUnavailable
    | Ack
    | ErrorMessage
    | TabsMessage
    | DialogsMessage
    | NoticeMessage
)


def encode(message: ServerMessage) -> str:
    """The message as JSON text, re-validated against its own model first."""
    type(message).model_validate(message.model_dump())
    return message.model_dump_json()


# --- WebSocket: client -> server ---------------------------------------------


class Takeover(Closed):
    type: Literal["takeover"]


class Release(Closed):
    type: Literal["release"]


class InputMessage(Closed):
    type: Literal["input"]
    sequence: Positive
    input: Annotated[PointerInput | TextInput | KeyInput | WheelInput | NavigateInput, Field(discriminator="type")]


ClientMessage = Annotated[Takeover | Release | InputMessage, Field(discriminator="type")]
CLIENT_MESSAGE: TypeAdapter[Takeover | Release | InputMessage] = TypeAdapter(ClientMessage)


class InputMessageWithTabs(Closed):
    """An input of a ``ram-tabs-v1`` socket: the spec's inputs, or switching/closing a tab."""

    type: Literal["input"]
    sequence: Positive
    input: Annotated[
        PointerInput | TextInput | KeyInput | WheelInput | NavigateInput | TabInput, Field(discriminator="type")
    ]


ClientMessageWithTabs = Annotated[Takeover | Release | InputMessageWithTabs, Field(discriminator="type")]
CLIENT_MESSAGE_WITH_TABS: TypeAdapter[Takeover | Release | InputMessageWithTabs] = TypeAdapter(ClientMessageWithTabs)


class InputMessageWithAdditions(Closed):
    """An input of a socket that offered ``ram-dialogs-v1`` (and perhaps ``ram-tabs-v1``): the spec's
    inputs, a tab input (only with ``ram-tabs-v1``) or a dialog's answer."""

    type: Literal["input"]
    sequence: Positive
    input: Annotated[
        PointerInput | TextInput | KeyInput | WheelInput | NavigateInput | TabInput | DialogInput,
        Field(discriminator="type"),
    ]


ClientMessageWithAdditions = Annotated[Takeover | Release | InputMessageWithAdditions, Field(discriminator="type")]
CLIENT_MESSAGE_WITH_ADDITIONS: TypeAdapter[Takeover | Release | InputMessageWithAdditions] = TypeAdapter(
    ClientMessageWithAdditions
)
