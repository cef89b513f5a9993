"""The MCP tools of runs (served at ``/mcp`` by ``runs.mcp``).

Each tool is the MCP twin of a REST endpoint in ``runs/api.py``: it calls the
same selector or service and answers with the same contract model, validated
before it leaves (the structured result is the REST body; the text content is
that JSON). A refusal is a tool error whose structured content is the REST
error shape ``{"error": message, ...}`` plus the HTTP ``status`` it stands for.

A tool is declared once with ``@ram_tool(auth, ...)``: ``auth`` is the REST operation's own rule
(``accounts.auth``), whose key kinds ``TOOL_KINDS`` lists and every call checks (before its
arguments are read, and again when it runs); its arguments reuse the REST models (the run list's
are ``runs.queries.RunListQuery``'s fields).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, TypeVar

from channels.db import database_sync_to_async
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from accounts.auth import READER_KEYS, RUNNER_KEY, ApiKeyAuth
from accounts.errors import KeyKindRefused, KeyMissing
from accounts.models import ApiKey
from computers import placement as computer_placement
from computers import services as computer_services
from computers.contracts import ComputerDeletedOut, ComputerIdIn, ComputerList, ComputerOut
from computers.errors import ComputerUnknown
from computers.selectors import computer_out, computers_for_account
from core.api import REST_STATUS, InvalidBody, refuse_nul, validation_message
from core.errors import DomainError, status_for
from core.json import json_bytes
from runs import credentials, external, queries, selectors, services
from runs.contracts import (
    ActionOut,
    ComputerId,
    ContinueOut,
    EventList,
    IdempotencyKey,
    InterventionEnvelope,
    ObservationOut,
    RunList,
    RunOut,
    StepList,
    StoredCredentialList,
    ViewerOut,
)
from runs.models import Run
from runs.pauses import PAUSE_KINDS
from runs.recordings import RecordingTimeline, recording_timeline
from runs.tool_calls import ActionIn, AgentConfig, RunCreateIn, RunTask
from runs.tools import TOOLS

# The authenticated key travels to the tools inside the ASGI scope of the request.
SCOPE_KEY = "ram.api_key"
# Who may call a tool: the REST rule of the same operation (``accounts.auth``), one object for both edges.
READ_KINDS = READER_KEYS.kinds
# The MCP edge: a refusal carries the HTTP status its REST twin would answer.
MCP_STATUS: dict[type[DomainError], int] = REST_STATUS

INSTRUCTIONS = """\
RAM runs browser agents on private computers. A run that needs a person pauses with
status waiting_for_input and a typed required_action; nothing resumes on its own.
Use run_intervention for the safe descriptor (progress, user_action, next_step and a
locator that carries no capability), show those to the person, and only after they
act call run_continue with a stable idempotency_key. Never invent links. A continued run
ends with status continued and names its continuation in continued_run_id.
"""

# Which API key kinds may call each tool, filled by ``ram_tool`` as each tool is declared with its
# auth rule; a task_observer key only reads runs.
TOOL_KINDS: dict[str, tuple[str, ...]] = {}
# The kinds of the tool being called now (``RamMcpServer.call_tool`` sets them, ``_call`` checks again).
_CALLED_KINDS: ContextVar[tuple[str, ...]] = ContextVar("ram_mcp_called_kinds", default=())


class RamMcpServer(MCPServer[Any]):
    """Authorises the key before arguments are read, and reports bad arguments in the REST error shape."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        kinds = TOOL_KINDS.get(name, ())
        if name in TOOL_KINDS:
            try:
                _request_key(context, kinds)
            except DomainError as exc:
                return _refusal(exc)
        try:
            refuse_nul(arguments)
        except DomainError as exc:
            return _refusal(exc)
        called = _CALLED_KINDS.set(kinds)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                return _refusal(InvalidBody(validation_message(exc.__cause__)))
            raise
        finally:
            _CALLED_KINDS.reset(called)


server = RamMcpServer(name="ram", title="RAM runs", instructions=INSTRUCTIONS, version="1", log_level="WARNING")

RunId = Annotated[str, Field(description="The run's UUID.")]

Tool = TypeVar("Tool", bound=Callable[..., Awaitable[CallToolResult]])


def ram_tool(auth: ApiKeyAuth, **declared: Any) -> Callable[[Tool], Tool]:
    """Declare an MCP tool (its title, description and annotations; its name, arguments and result
    come from the handler) with the key kinds of ``auth``, the REST operation's rule."""

    def register(handler: Tool) -> Tool:
        TOOL_KINDS[handler.__name__] = auth.kinds
        server.tool(**declared)(handler)
        return handler

    return register


# --- The seam between a tool and the request --------------------------------


def _request_key(ctx: Context[Any, Any] | None, kinds: tuple[str, ...]) -> ApiKey:
    """The key that ``McpEndpoint`` authenticated for this HTTP request, if its kind may use the tool."""
    request = ctx.request_context.request if ctx is not None else None
    key: ApiKey | None = getattr(request, "scope", {}).get(SCOPE_KEY)
    if key is None:
        raise KeyMissing()
    if key.kind not in kinds:
        raise KeyKindRefused(f"A {key.kind} key cannot use this tool.")
    return key


def _ok(wire: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json_bytes(wire).decode())], structured_content=wire)


def _refusal(exc: DomainError) -> CallToolResult:
    wire = {"error": exc.message, "status": status_for(exc, MCP_STATUS), **exc.extra}
    return CallToolResult(
        content=[TextContent(type="text", text=json_bytes(wire).decode())], structured_content=wire, is_error=True
    )


async def _call(ctx: Context[Any], body: Callable[[ApiKey], dict[str, Any]]) -> CallToolResult:
    """Authorise the request's key for this tool, run ``body`` off the event loop, render."""
    try:
        key = _request_key(ctx, _CALLED_KINDS.get())  # checked again here: no tool runs on a key it does not allow
        wire: dict[str, Any] = await database_sync_to_async(body)(key)
    except DomainError as exc:
        return _refusal(exc)
    return _ok(wire)


async def _call_waiting(
    ctx: Context[Any], body: Callable[[ApiKey], external.StepAnswer | external.StepWait]
) -> CallToolResult:
    """``_call`` for an action's step: a step that still runs is awaited on the event loop (no
    thread held), within the account's bound on long waits (``runs.external``)."""
    try:
        key = _request_key(ctx, _CALLED_KINDS.get())
        answer = await database_sync_to_async(body)(key)
        if isinstance(answer, external.StepWait):
            answer = await external.step_waited(answer, _hop)
    except DomainError as exc:
        return _refusal(exc)
    return _ok(answer.to_wire())


async def _hop(fn: Callable[[], Any]) -> Any:
    return await database_sync_to_async(fn)()


# --- Tools ------------------------------------------------------------------


def _run_wire(run: Run, *, observer: bool = False) -> dict[str, Any]:
    return selectors.run_out(run, observer=observer).to_wire()


@ram_tool(
    READER_KEYS,
    title="Read a run",
    description=(
        "A run of your account: required_action while it waits for input; continued_run_id once it was "
        "continued (status continued)."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_get(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, RunOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return _run_wire(run, observer=key.kind == ApiKey.Kind.TASK_OBSERVER)

    return await _call(ctx, body)


@ram_tool(
    READER_KEYS,
    title="List stored credentials",
    description=(
        "Your account's stored portal credentials: credential_id (pass it to browser_login), label, "
        "origins, when saved and last used. Never a password or username."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def credentials_list(ctx: Context[Any]) -> Annotated[CallToolResult, StoredCredentialList]:
    def body(key: ApiKey) -> dict[str, Any]:
        return credentials.stored_credentials_wire(account=key.account)

    return await _call(ctx, body)


@ram_tool(
    READER_KEYS,
    title="List runs",
    description=(
        "Your account's runs, newest first. Filters: status, kind (the open pause kind: "
        f"{', '.join(PAUSE_KINDS)}) and computer_id. {queries.bounds_words()}"
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def runs_list(
    ctx: Context[Any],
    # The fields of ``queries.RunListQuery``, as REST reads them.
    status: queries.Status = None,
    kind: queries.Kind = None,
    computer_id: queries.ComputerFilter = None,
    limit: queries.Limit = queries.LIMIT_DEFAULT,
    offset: queries.Offset = 0,
) -> Annotated[CallToolResult, RunList]:
    query = queries.RunListQuery(status=status, kind=kind, computer_id=computer_id, limit=limit, offset=offset)

    def body(key: ApiKey) -> dict[str, Any]:
        page = selectors.runs_page(
            account=key.account, observer=key.kind == ApiKey.Kind.TASK_OBSERVER, **query.page_arguments()
        )
        return page.to_wire()

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Intervention descriptor",
    description=(
        "The safe descriptor {intervention: ...} of a paused run (runner key only): texts for the person and "
        "human_action.url, a locator on this server's origin that carries no capability. Show progress, "
        "user_action and next_step; check that the URL is this origin and /tasks/<run_id>/intervention. "
        "Refused for continue and credits pauses and when no intervention is available."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_intervention(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, InterventionEnvelope]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return selectors.intervention_descriptor(run=run).to_wire()

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Continue a paused run",
    description=(
        "Continue a paused run explicitly (runner key only). The same idempotency_key replays the first "
        "answer; a lost answer never authorises another key: retry with the same one. Only after the person "
        "has acted (and, for credits, the account was topped up)."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
)
async def run_continue(
    run_id: RunId,
    idempotency_key: Annotated[
        IdempotencyKey, Field(description="8-200 characters of A-Za-z0-9._:- ; keep it to retry safely.")
    ],
    ctx: Context[Any],
) -> Annotated[CallToolResult, ContinueOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        continued = services.run_continue(key=key, run_id=selectors.parse_uuid(run_id), idempotency_key=idempotency_key)
        return continued.answer

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Cancel a run",
    description="Cancel a run that has not finished (runner key only); its intervention link becomes unavailable.",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_cancel(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, RunOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        services.run_cancel(run=run)
        return _run_wire(selectors.run_for_account(account=key.account, run_id=run_id))

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Create a run",
    description=(
        "Create a run on one of your account's computers (runner key only). It starts when its computer is free "
        "(one run per computer) and your account is below its limit of running runs; until then it is queued "
        "with queue_position (1 = next). "
        "The same body as POST /api/runs: task {goal, steps}, computer_id, optional agent and max_model_calls."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True),
)
async def run_create(
    task: RunTask,
    computer_id: ComputerId,
    ctx: Context[Any],
    agent: AgentConfig | None = None,
    max_model_calls: Annotated[int, Field(ge=1, le=1000, description="1-1000, default 20")] = 20,
    recording: Annotated[bool, Field(description="false: this run's screen is not recorded (default true)")] = True,
) -> Annotated[CallToolResult, RunOut]:
    body_in = RunCreateIn(
        task=task,
        computer_id=computer_id,
        agent=agent or AgentConfig(),
        max_model_calls=max_model_calls,
        recording=recording,
    )

    def body(key: ApiKey) -> dict[str, Any]:
        return _run_wire(services.run_submit(account=key.account, body=body_in))

    return await _call(ctx, body)


ComputerIdArg = Annotated[str, Field(description="The computer's id in your account.")]


@ram_tool(
    RUNNER_KEY,
    title="List computers",
    description="Your account's computers (runner key only): available (a visual session can be created now) and state.",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def computers_list(ctx: Context[Any]) -> Annotated[CallToolResult, ComputerList]:
    def body(key: ApiKey) -> dict[str, Any]:
        computers = [computer_out(c) for c in computers_for_account(account=key.account)]
        return ComputerList(computers=computers).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Create a computer",
    description=(
        "Create a computer in your account (runner key only), named by an id of your own: ids are per account and "
        "an id once used is never given again there. The same body as POST /api/computers: id, optional name."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False),
)
async def computer_create(
    id: Annotated[ComputerIdIn, Field(description="The new computer's id in your account (1-128 letters, digits, _ or -).")],
    ctx: Context[Any],
    name: Annotated[str, Field(max_length=200, description="A display name (up to 200 characters).")] = "",
) -> Annotated[CallToolResult, ComputerOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        created = computer_services.computer_create(account=key.account, handle=id, name=name)
        return computer_out(computers_for_account(account=key.account).get(pk=created.pk)).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Delete a computer",
    description=(
        "Delete one of your account's computers (runner key only): its open runs are cancelled (their links become "
        "unavailable), its generation ends, its browser profile is wiped; its id then answers not found."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False),
)
async def computer_delete(computer_id: ComputerIdArg, ctx: Context[Any]) -> Annotated[CallToolResult, ComputerDeletedOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
        if computer is None:
            raise ComputerUnknown()
        computer_services.computer_delete(computer=computer)
        return ComputerDeletedOut(id=computer_id).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Start a computer",
    description=(
        "Start one of your account's computers (runner key only): it reads starting, then ready once its executor "
        "runs on a free computer slot. A run on a stopped computer starts it by itself; an idle one stops by itself "
        "(its logins kept)."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
)
async def computer_start(computer_id: ComputerIdArg, ctx: Context[Any]) -> Annotated[CallToolResult, ComputerOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
        if computer is None:
            raise ComputerUnknown()
        computer_placement.computer_start(computer=computer)
        return computer_out(computers_for_account(account=key.account).get(pk=computer.pk)).model_dump(mode="json")

    return await _call(ctx, body)


# The viewer link is for a person the runner's harness serves; an observer key gets no screen.
@ram_tool(
    RUNNER_KEY,
    title="Viewer link",
    description=(
        "The authenticated clean-screen link (/view?computer_id=...) of the run's computer (runner key only). "
        "Present its url only when the person wants to follow along; it requires the person's own sign-in. "
        "Without a viewer, report that it is unavailable: never build a link yourself."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_viewer(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, ViewerOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        # As GET /api/runs/{id}/viewer: the run's current computer binding, checked now.
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return selectors.run_viewer(run=run).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Act on the run's computer",
    description=(
        "One tool call of an external run (created with agent {type: external}; runner key only): "
        + ", ".join(TOOLS)
        + ", with the same arguments as the built-in agent (screenshot stores a masked PNG and answers its "
        "artifact_id). Each action is one model call of the run's budget. The same idempotency_key answers the first "
        "action's step and never runs it twice: after a lost answer, retry with the same key. state 'started' "
        "means it still runs: read it with run_action. A request_* tool pauses the run (required_action)."
    ),
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True),
)
async def run_act(
    run_id: RunId,
    tool: Annotated[str, Field(description="A tool of the registry, e.g. navigate or browser_login.")],
    idempotency_key: Annotated[
        IdempotencyKey, Field(description="8-200 characters of A-Za-z0-9._:- ; one per action, kept to retry safely.")
    ],
    ctx: Context[Any],
    arguments: Annotated[dict[str, Any] | None, Field(description="The tool's arguments.")] = None,
) -> Annotated[CallToolResult, ActionOut]:
    def body(key: ApiKey) -> external.StepAnswer | external.StepWait:
        try:
            action = ActionIn(tool=tool, arguments=arguments or {}, idempotency_key=idempotency_key)
        except ValidationError as exc:
            raise InvalidBody(validation_message(exc)) from None
        return external.run_act(account=key.account, run_id=selectors.parse_uuid(run_id), body=action)

    return await _call_waiting(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Read an action's step",
    description=(
        "The step an action recorded (runner key only), waiting up to wait seconds (0-25) while it still runs "
        "(state 'started'). Never runs anything."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_action(
    run_id: RunId,
    step_id: Annotated[int, Field(ge=1, description="The step_id run_act answered.")],
    ctx: Context[Any],
    wait: Annotated[int, Field(ge=0, le=25, description="seconds to wait while it runs, default 20")] = 20,
) -> Annotated[CallToolResult, ActionOut]:
    def body(key: ApiKey) -> external.StepAnswer | external.StepWait:
        return external.action_wait(
            account=key.account, run_id=selectors.parse_uuid(run_id), step_id=step_id, wait_seconds=wait
        )

    return await _call_waiting(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="Observe the run's page",
    description=(
        "What the run's computer shows now (runner key only): url, title and the page's visible text (bounded; "
        "typed passwords are never in it). Takes no screenshot and changes nothing."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_observe(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, ObservationOut]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return external.run_observe(run=run).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    READER_KEYS,
    title="List a run's steps",
    description=(
        "The run's steps in order: tool, secret-free arguments (typed text only as its length), state "
        "(started, succeeded, failed, uncertain), result (isError, code, category), start and end times and "
        "the ids of its masked screenshots. Pass next_after as after for the next page."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_steps(
    run_id: RunId,
    ctx: Context[Any],
    after: Annotated[int | None, Field(ge=0, description="the index of the last step already read")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="1-100, default 50")] = 50,
) -> Annotated[CallToolResult, StepList]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return selectors.steps_page(run=run, after=after, limit=limit).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    READER_KEYS,
    title="List a run's events",
    description=(
        "The run's append-only, secret-free events, oldest first (run_started, step_started, step_completed, "
        "run_paused, screenshot_captured, control_taken, control_released, run_continued, run_cancelled, ...). Pass the last id you read as after to get "
        "only newer ones."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_events(
    run_id: RunId,
    ctx: Context[Any],
    after: Annotated[int | None, Field(ge=0, description="the id of the last event already read")] = None,
    limit: Annotated[int, Field(ge=1, le=500, description="1-500, default 100")] = 100,
) -> Annotated[CallToolResult, EventList]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return selectors.events_page(run=run, after=after, limit=limit).model_dump(mode="json")

    return await _call(ctx, body)


@ram_tool(
    RUNNER_KEY,
    title="A run's recording and its timeline",
    description=(
        "The run's screen recording (runner key only): its WebM/VP9 segments (each a complete file at "
        "GET /api/runs/{id}/recording?segment=N, with range requests) and its timeline: each step (tool, "
        "state, secret-free arguments), pause, continuation and period of a person's control (who, how many "
        "inputs, never what was typed), at offset_ms into the video. Secret fields were masked before any "
        "frame was stored. A run without a recording (yet) is a 404 refusal."
    ),
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def run_recording(run_id: RunId, ctx: Context[Any]) -> Annotated[CallToolResult, RecordingTimeline]:
    def body(key: ApiKey) -> dict[str, Any]:
        run = selectors.run_for_account(account=key.account, run_id=run_id)
        return recording_timeline(run=run).model_dump(mode="json")

    return await _call(ctx, body)
