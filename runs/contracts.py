"""Wire contracts of runs: the persisted result, ``required_action`` and the
intervention descriptor. Every model is closed (``extra="forbid"``); the same
model validates input and builds output, so the spec's fields read off here.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    JsonValue,
    StringConstraints,
    TypeAdapter,
    field_serializer,
    model_validator,
)

from core.contracts import (
    AbsoluteUrl,
    Closed,
    ComputerId,
    LiteralTrue,
    VersionOne,
    utf16_length,
)

InterventionReason = Literal[
    "authentication", "captcha", "verification", "missing_information", "authorization_required", "other"
]

# --- Texts shown to a person -------------------------------------------------

_FORBIDDEN_IN_TEXT = [
    (re.compile(r"(?i)https?:"), "an http(s) link"),
    (re.compile(r"(?i)#\s*invite|invite\s*="), "an invite fragment"),
    (re.compile(r"(?i)ram-ticket\.|\bticket\s*[=:]"), "a ticket"),
    (re.compile(r"(?i)bearer"), "a Bearer value"),
    (re.compile(r"ram_(?:rk|ok)_"), "an API key"),
]


def _check_text(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if utf16_length(value) > 500:
        raise ValueError("must be at most 500 UTF-16 code units")
    for pattern, what in _FORBIDDEN_IN_TEXT:
        if pattern.search(value):
            raise ValueError(f"must not contain {what}")
    return value


SafeText = Annotated[str, AfterValidator(_check_text)]


class HumanAction(Closed):
    url: AbsoluteUrl
    requires_login: LiteralTrue


class InterventionDescriptor(Closed):
    version: VersionOne
    run_id: uuid.UUID
    computer_id: ComputerId
    kind: Literal["human_control", "credential", "google_connection"]
    state: Literal["pending", "credential_saved"]
    reason: InterventionReason
    progress: SafeText
    user_action: SafeText
    next_step: SafeText
    request_id: uuid.UUID | None = None
    expires_at: AwareDatetime | None = None
    human_action: HumanAction

    @model_validator(mode="after")
    def _kind_rules(self) -> InterventionDescriptor:
        if self.kind == "credential":
            if self.request_id is None or self.expires_at is None:
                raise ValueError("a credential intervention needs request_id and expires_at")
        else:
            if self.state != "pending":
                raise ValueError(f"a {self.kind} intervention is always pending")
            if self.expires_at is not None:
                raise ValueError(f"a {self.kind} intervention has no expires_at")
            if self.kind == "human_control" and self.request_id is not None:
                raise ValueError("a human_control intervention has no request_id")
            if self.kind == "google_connection" and self.request_id != self.run_id:
                raise ValueError("a google_connection request_id equals run_id")
        return self

    @field_serializer("expires_at")
    def _iso(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class InterventionEnvelope(Closed):
    """The intervention descriptor: metadata and a locator, never a capability."""

    intervention: InterventionDescriptor

    def to_wire(self) -> dict[str, Any]:
        return {"intervention": self.intervention.to_wire()}


# --- The persisted result of a run -------------------------------------------


class TakeoverPause(Closed):
    kind: Literal["takeover"]
    reason: InterventionReason


class CredentialPause(Closed):
    kind: Literal["credential"]
    reason: InterventionReason
    request_id: uuid.UUID


class ConnectionPause(Closed):
    kind: Literal["connection"]
    reason: InterventionReason
    request_id: uuid.UUID


# Why a run waits for an explicit continuation: its model-call budget is spent, or an
# external agent's harness sent no action for RAM_EXTERNAL_IDLE_SECONDS.
ContinueReason = Literal["max_model_calls_reached", "idle_timeout"]


class ContinuePause(Closed):
    kind: Literal["continue"]
    reason: ContinueReason


class CreditsPause(Closed):
    kind: Literal["credits"]
    reason: Literal["insufficient_credits"]
    required_microcredits: int = Field(ge=0)
    available_microcredits: int = Field(ge=0)


Pause = Annotated[
    TakeoverPause | CredentialPause | ConnectionPause | ContinuePause | CreditsPause,
    Field(discriminator="kind"),
]


class NeedsInputResult(Closed):
    outcome: Literal["needs_input"]
    pause: Pause


class SucceededResult(Closed):
    outcome: Literal["succeeded"]
    output: JsonValue


ToolErrorCategory = Literal["unprocessable", "unavailable", "invalid"]


class FailedResult(Closed):
    outcome: Literal["failed"]
    error: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    # Set when a tool's error ended the run (a scripted step without on_error "continue"):
    # the step's index, its tool and the tool result's code and category.
    step: int | None = Field(default=None, ge=0)
    tool: str | None = None
    code: str | None = None
    category: ToolErrorCategory | None = None


class CancelledResult(Closed):
    outcome: Literal["cancelled"]


RunResult = Annotated[
    NeedsInputResult | SucceededResult | FailedResult | CancelledResult, Field(discriminator="outcome")
]
# Validates a result before it is persisted on a run.
RUN_RESULT: TypeAdapter[NeedsInputResult | SucceededResult | FailedResult | CancelledResult] = TypeAdapter(
    RunResult
)


# --- required_action -----------------------------------------------------------

Decimal = Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]*)$")]


class Viewer(Closed):
    computer_id: ComputerId
    url: AbsoluteUrl
    requires_login: LiteralTrue


class _ActionBase(Closed):
    version: VersionOne
    resume: Literal["explicit_continue"]


class TakeoverAction(_ActionBase):
    kind: Literal["takeover"]
    reason: InterventionReason
    # null when the run's computer binding no longer holds: no link is made up.
    viewer: Viewer | None
    human_action: HumanAction


class CredentialAction(_ActionBase):
    kind: Literal["credential"]
    reason: InterventionReason
    request_id: uuid.UUID
    expires_at: AwareDatetime
    human_action: HumanAction

    @field_serializer("expires_at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ConnectionAction(_ActionBase):
    kind: Literal["connection"]
    reason: InterventionReason
    provider: Literal["google"]
    capabilities: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = Field(min_length=1)
    human_action: HumanAction


class Budget(Closed):
    model_calls: int = Field(ge=0)
    max_model_calls: int = Field(ge=1)
    remaining_model_calls: int = Field(ge=0)


class ContinueAction(_ActionBase):
    kind: Literal["continue"]
    reason: ContinueReason
    budget: Budget


class Credits(Closed):
    required_microcredits: Decimal
    available_microcredits: Decimal
    missing_microcredits: Decimal


class CreditsAction(_ActionBase):
    kind: Literal["credits"]
    reason: Literal["insufficient_credits"]
    credits: Credits


RequiredActionModel = TakeoverAction | CredentialAction | ConnectionAction | ContinueAction | CreditsAction
RequiredAction = Annotated[
    TakeoverAction | CredentialAction | ConnectionAction | ContinueAction | CreditsAction,
    Field(discriminator="kind"),
]


REQUIRED_ACTION: TypeAdapter[
    TakeoverAction | CredentialAction | ConnectionAction | ContinueAction | CreditsAction
] = TypeAdapter(RequiredAction)


# --- Run resources -------------------------------------------------------------

RunStatus = Literal["queued", "running", "waiting_for_input", "succeeded", "failed", "cancelled", "continued"]


class RunOut(Closed):
    """A run."""

    id: uuid.UUID
    status: RunStatus
    computer_id: str | None
    task: JsonValue
    model_calls: int
    max_model_calls: int
    result: dict[str, JsonValue] | None
    required_action: RequiredAction | None = None
    continued_from: uuid.UUID | None
    continued_run_id: uuid.UUID | None
    queue_position: int | None = Field(
        ge=1,
        description="While queued: the run's place in its computer's queue (1 = next to start); null otherwise.",
    )
    queue_reason: str | None = Field(
        default=None,
        description="While queued: why it has not started yet, for a person to read (its computer is starting, "
        "every computer slot is in use, the account's limit of running runs); null otherwise.",
    )
    created_at: datetime
    updated_at: datetime

    def to_wire(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.required_action is None:
            del data["required_action"]
        return data


class ViewerOut(Closed):
    """The authenticated clean-screen link of the run's computer."""

    available: Literal[True]
    computer_id: str
    url: str
    requires_login: Literal[True]


class RunList(Closed):
    """A page of runs, newest first."""

    runs: list[RunOut]
    count: int
    next_offset: int | None

    def to_wire(self) -> dict[str, Any]:
        return {"runs": [run.to_wire() for run in self.runs], "count": self.count, "next_offset": self.next_offset}


class StoredCredentialOut(Closed):
    """What a harness may know of a stored portal credential: never a secret, nor the username."""

    credential_id: str
    label: str
    origins: list[str]
    saved_at: datetime
    last_used_at: datetime | None
    last_used_run_id: uuid.UUID | None


class StoredCredentialList(Closed):
    """The account's stored portal credentials, newest first (pass ``credential_id`` to ``browser_login``)."""

    credentials: list[StoredCredentialOut]


IdempotencyKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{8,200}$")]


class ContinueIn(Closed):
    idempotency_key: IdempotencyKey


class CancelIn(Closed):
    pass


class ContinueOut(Closed):
    """The continuation run created for a paused run."""

    continued_from: uuid.UUID
    run: RunOut

    def to_wire(self) -> dict[str, Any]:
        return {"continued_from": str(self.continued_from), "run": self.run.to_wire()}


# --- What the model sees of a tool call -------------------------------------------


class DownloadOut(Closed):
    """A download the computer's browser finished (or gave up) since the run's previous step.

    ``stored``: an artifact of the account (``GET /api/artifacts/{artifact_id}``, runner keys)
    with its content type (from its name), size and SHA-256; ``refused``: bigger than
    ``RAM_DOWNLOAD_MAX_BYTES`` (nothing stored); ``cancelled`` (a person's takeover, the page)
    or ``failed``.
    """

    outcome: Literal["stored", "refused", "cancelled", "failed"]
    filename: Annotated[str, StringConstraints(max_length=255)]
    artifact_id: str | None = None
    content_type: str | None = None
    size: int | None = None
    sha256: str | None = None
    reason: Literal["too_large"] | None = None


class ArtifactOut(Closed):
    """A stored file of the account: a harness's upload (for the ``upload`` tool) or a download."""

    id: uuid.UUID
    kind: Literal["diagnostic", "screenshot", "download", "upload"]
    filename: str
    content_type: str
    size: int
    sha256: str
    created_at: datetime


class ToolResult(Closed):
    """What the model sees of a tool call: never a secret."""

    content: Annotated[str, StringConstraints(max_length=20_000)]
    isError: bool = False  # noqa: N815
    code: str | None = None
    category: ToolErrorCategory | None = None
    artifact_id: str | None = None
    # The downloads the step finished (stored as artifacts, refused, cancelled or failed).
    downloads: list[DownloadOut] | None = None


# --- Bring your own agent: one action, the observation -------------------------------

StepState = Literal["started", "succeeded", "failed", "uncertain"]


class ActionOut(Closed):
    """The step an action recorded: its result once settled (``started``: still running, poll it)."""

    step_id: int
    index: int
    tool: str
    state: StepState
    result: ToolResult | None
    run_status: RunStatus
    required_action: RequiredAction | None = None

    def to_wire(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        data.setdefault("result", None)
        return data


class ObservedTab(Closed):
    """An open page of the computer's browser (a popup, a new tab); ``active`` is the one actions act on."""

    id: str
    title: str
    url: str
    active: bool


class ObservedDialog(Closed):
    """A dialog a page opened that blocks it until answered (``dialog_answer``, or a person on the screen)."""

    id: str
    tab: str
    kind: Literal["alert", "confirm", "prompt", "beforeunload"]
    message: str
    default_text: str


class ObservedAuthPrompt(Closed):
    """A site's HTTP sign-in prompt (basic auth): its page waits until it is answered (``auth_answer``
    with a stored credential of exactly ``origin``, or a person on the screen). ``realm`` is the
    site's own text."""

    id: str
    tab: str
    kind: Literal["auth"]
    origin: str
    realm: str


ObservedWaiting = Annotated[ObservedDialog | ObservedAuthPrompt, Field(discriminator="kind")]
OBSERVED_WAITING: TypeAdapter[ObservedDialog | ObservedAuthPrompt] = TypeAdapter(ObservedWaiting)


class ObservationOut(Closed):
    """What an agent needs to decide, secret-free: the page's address, title and visible text, and the open tabs."""

    run_id: uuid.UUID
    run_status: RunStatus
    url: str
    title: str
    text: str
    truncated: bool
    control: str
    # The run's latest masked screenshot (GET /api/artifacts/{id}); a GET takes none.
    screenshot_artifact_id: str | None = None
    tabs: list[ObservedTab] = Field(default_factory=list)
    dialogs: list[ObservedWaiting] = Field(default_factory=list)


# --- What happened: steps and events ----------------------------------------------------


class StepOut(Closed):
    """One step of a run: the tool, a secret-free summary of its arguments (typed text as its
    length only), its state and its result."""

    step_id: int
    index: int
    tool: str
    # Secret-free: a navigation's address without its query, a typed text's ``characters``;
    # ``{"withheld": true}`` when they carried a secret the computer's browser holds (docs/security.md).
    arguments: dict[str, JsonValue]
    state: StepState
    # The result the agent saw (null while ``started``, or ``uncertain``).
    result: ToolResult | None
    started_at: datetime
    finished_at: datetime | None
    # Masked screenshots and stored downloads of this step (GET /api/artifacts/{id}, runner keys).
    artifact_ids: list[str]


class StepList(Closed):
    """A page of a run's steps in order; pass ``next_after`` as ``after`` for the next page."""

    steps: list[StepOut]
    next_after: int | None


class EventOut(Closed):
    """One append-only, secret-free event of a run."""

    id: int
    kind: str
    data: dict[str, JsonValue]
    created_at: datetime


class EventList(Closed):
    """A page of a run's events, oldest first; pass ``next_after`` as ``after`` for the next page
    (null: none newer yet — poll again with the last id you read)."""

    events: list[EventOut]
    next_after: int | None


# --- The Vault form and the legacy intervention endpoint -----------------------

_TOTP_SECRET = r"^[A-Z2-7]{16,128}=*$"


class CredentialIn(Closed):
    """What the person types into the Vault form (the invite travels in a header)."""

    username: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    totp_secret: Annotated[str, StringConstraints(pattern=_TOTP_SECRET)] | None = None
    # The person's explicit confirmation that this replaces a credential stored for another request.
    replace_existing: bool = False

    @model_validator(mode="before")
    @classmethod
    def _normalise_totp(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("totp_secret"), str):
            cleaned = data["totp_secret"].replace(" ", "").upper()
            data = {**data, "totp_secret": cleaned or None}
        return data


class CredentialSavedOut(Closed):
    """The credential is stored in the vault; nobody has signed in with it."""

    request_id: uuid.UUID
    state: Literal["credential_saved"]


class LegacyInterventionOut(Closed):
    """The legacy intervention answer: the descriptor; ``invite`` is always null (a GET mints nothing)."""

    intervention: InterventionDescriptor
    invite: None = None

    def to_wire(self) -> dict[str, Any]:
        return {"intervention": self.intervention.to_wire(), "invite": None}
