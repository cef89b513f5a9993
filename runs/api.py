"""REST endpoints of runs. Thin: parse, one service or selector call, render."""

from __future__ import annotations

import base64
import re
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.http import content_disposition_header

from accounts.auth import READER_KEYS, RUNNER_KEY
from accounts.models import ApiKey
from computers import files
from core.api import Query, Router, integer_query, json_response, operation, parse_json_body
from core.waits import Hop, respond_later
from runs import credentials, external, selectors, services
from runs.contracts import (
    ActionOut,
    ArtifactOut,
    CancelIn,
    ContinueIn,
    ContinueOut,
    EventList,
    InterventionEnvelope,
    LegacyInterventionOut,
    ObservationOut,
    RunList,
    RunOut,
    StepList,
    StoredCredentialList,
    ViewerOut,
)
from runs.errors import InvalidFilter, StepNotFound
from runs.models import Run
from runs.queries import RunListQuery
from runs.tool_calls import ActionIn, RunCreateIn

router = Router()

# An upload's file name as a JSON Schema can say it (computers.files.clean_filename is the rule: it also
# refuses Unicode format, private-use and unassigned characters, which a pattern cannot list).
FILENAME_PATTERN = r"^[^\s./\\\x00-\x1f\x7f-\x9f](?:[^/\\\x00-\x1f\x7f-\x9f]{0,253}[^\s./\\\x00-\x1f\x7f-\x9f])?$"


def _run_wire(run: Run, *, observer: bool = False) -> dict[str, Any]:
    return selectors.run_out(run, observer=observer).to_wire()


def _int_param(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,18}", raw) or not low <= int(raw) <= high:
        raise InvalidFilter(f"Invalid request: {name} must be an integer from {low} to {high}.")
    return int(raw)


@operation(
    summary="List the account's runs, newest first",
    auth=READER_KEYS,
    responses={200: RunList, 400: "Invalid filter or page."},
    query=RunListQuery.rest_parameters(),
)
def runs_list(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    query = RunListQuery.from_rest(request.GET)
    page = selectors.runs_page(
        account=key.account, observer=key.kind == ApiKey.Kind.TASK_OBSERVER, **query.page_arguments()
    )
    return json_response(page.to_wire())


@operation(
    auth=RUNNER_KEY,
    summary="Create a run on one of the account's computers; the run loop starts it",
    body=RunCreateIn,
    responses={
        201: RunOut,
        400: "Invalid task, agent configuration or budget; a scripted run without task.steps "
        "(run.nothing_to_do); or agent.browser.provider is not the provider of the "
        "computer's browser backend (run.browser_provider_mismatch).",
        404: "No such computer in this account.",
        422: "The agent type is not configured on this server (run.agent_unavailable).",
    },
)
def run_create(request: HttpRequest, *, key: ApiKey, body: RunCreateIn) -> HttpResponse:
    run = services.run_submit(account=key.account, body=body)
    return json_response(_run_wire(run), status=201)


@operation(summary="Read a run and its required_action", auth=READER_KEYS, responses={200: RunOut, 404: "No such run."})
def run_get(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return json_response(_run_wire(run, observer=key.kind == ApiKey.Kind.TASK_OBSERVER))


@operation(
    auth=RUNNER_KEY,
    summary="The safe intervention descriptor of a paused run (runner key only)",
    responses={
        200: InterventionEnvelope,
        404: "No such run.",
        409: "No intervention is available (not paused, continued, cancelled, expired, revoked binding, or a continue/credits pause).",
    },
)
def run_intervention_descriptor(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return json_response(selectors.intervention_descriptor(run=run).to_wire())


@operation(
    auth=RUNNER_KEY,
    summary="Continue a paused run explicitly, once per idempotency_key",
    body=ContinueIn,
    responses={
        201: ContinueOut,
        400: "Invalid body.",
        404: "No such run.",
        409: "Not paused, already continued (continued_run_id), cancelled, or credits still short (missing_microcredits).",
        422: "The idempotency_key was used with a different request.",
    },
)
def run_continue(request: HttpRequest, *, key: ApiKey, run_id: str, body: ContinueIn) -> HttpResponse:
    continued = services.run_continue(key=key, run_id=selectors.parse_uuid(run_id), idempotency_key=body.idempotency_key)
    # A replay answers as the first answer did: 201, the same bytes.
    return json_response(continued.answer, status=201)


@operation(
    auth=RUNNER_KEY,
    summary="Cancel a run that has not finished",
    responses={200: RunOut, 404: "No such run.", 409: "Already finished or continued."},
)
def run_cancel(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    if request.body.strip():
        parse_json_body(request, CancelIn)  # an empty body or {}; any field is refused
    services.run_cancel(run=run)
    return json_response(_run_wire(selectors.run_for_account(account=key.account, run_id=run_id)))


@operation(
    auth=RUNNER_KEY,
    summary="Legacy: the intervention for existing trusted interfaces (runner key only; never show it to a model)",
    responses={
        200: LegacyInterventionOut,
        404: "No such run.",
        409: "No intervention is available (as for the descriptor).",
    },
)
def run_intervention_legacy(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    # A GET creates and consumes nothing: invites are minted only by the person's
    # POST /tasks/{id}/intervention/open and never stored, so ``invite`` is null.
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    envelope = selectors.intervention_descriptor(run=run)
    return json_response(LegacyInterventionOut(intervention=envelope.intervention).to_wire())


@operation(
    summary="List the account's stored portal credentials (ids, labels, origins; never a secret)",
    auth=READER_KEYS,
    responses={200: StoredCredentialList},
)
def credentials_list(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    return json_response(credentials.stored_credentials_wire(account=key.account))


router.route("/api/runs", get=runs_list, post=run_create)
router.route("/api/runs/{run_id}", get=run_get)
router.route("/api/runs/{run_id}/intervention-descriptor", get=run_intervention_descriptor)
router.route("/api/runs/{run_id}/continue", post=run_continue)
router.route("/api/runs/{run_id}/cancel", post=run_cancel)
router.route("/api/runs/{run_id}/intervention", get=run_intervention_legacy)
router.route("/api/credentials", get=credentials_list)


@operation(
    summary="The authenticated clean-screen link (/view) of the run's computer",
    auth=RUNNER_KEY,
    responses={200: ViewerOut, 404: "No such run.", 409: "No viewer is available for this run."},
)
def run_viewer(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return json_response(selectors.run_viewer(run=run).model_dump(mode="json"))


router.route("/api/runs/{run_id}/viewer", get=run_viewer)


@operation(
    auth=RUNNER_KEY,
    summary="One action of an external agent: a tool call run with the loop's guarantees, once per idempotency_key",
    body=ActionIn,
    responses={
        200: ActionOut,
        202: "The action still runs (after the wait, or at once when the account already holds "
        "RAM_ACCOUNT_MAX_LONG_WAITS waits): read its step with GET /api/runs/{run_id}/actions/{step_id}?wait=20.",
        400: "Invalid body, unknown tool, arguments that do not fit the tool, or a key reused for another action.",
        404: "No such run.",
        409: "Not an external run; still queued for its computer (queue_position), waiting for input "
        "(required_action), finished, cancelled or continued (continued_run_id); or another action still runs (step_id).",
        503: "The run's computer is draining for a restart of its executor (run.computer_draining): nothing was "
        "recorded or charged; retry once it is back.",
    },
)
def run_act(request: HttpRequest, *, key: ApiKey, run_id: str, body: ActionIn) -> HttpResponse:
    answer = external.run_act(account=key.account, run_id=selectors.parse_uuid(run_id), body=body)
    return _action_response(request, answer)


def _action_response(request: HttpRequest, answer: external.StepAnswer | external.StepWait) -> HttpResponse:
    """The step's answer, now or after its wait on the event loop (no thread held meanwhile)."""
    if isinstance(answer, external.StepWait):
        wait = answer

        async def produce(hop: Hop) -> HttpResponse:
            return _step_response(await external.step_waited(wait, hop))

        return respond_later(request, produce)
    return _step_response(answer)


def _step_response(out: external.StepAnswer) -> HttpResponse:
    """200 with a settled step, 202 with one that still runs."""
    return json_response(out.to_wire(), status=202 if out.state == "started" else 200)


@operation(
    auth=RUNNER_KEY,
    summary="An action's step, waiting up to `wait` seconds (at most 25) while it still runs",
    responses={
        200: ActionOut,
        202: "Still running after the wait (at once when the account already holds RAM_ACCOUNT_MAX_LONG_WAITS waits).",
        400: "Invalid wait.",
        404: "No such run or step.",
    },
    query={"wait": integer_query("seconds to wait while the step runs, 0-25, default 0", 0, 25)},
)
def run_action_get(request: HttpRequest, *, key: ApiKey, run_id: str, step_id: str) -> HttpResponse:
    wait = _int_param(request, "wait", 0, 0, 25)
    if not re.fullmatch(r"[0-9]{1,18}", step_id):
        raise StepNotFound()
    answer = external.action_wait(
        account=key.account, run_id=selectors.parse_uuid(run_id), step_id=int(step_id), wait_seconds=wait
    )
    return _action_response(request, answer)


@operation(
    auth=RUNNER_KEY,
    summary="What the run's page shows now: URL, title and bounded visible text (takes no screenshot, no secret)",
    responses={200: ObservationOut, 404: "No such run."},
)
def run_observation(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return json_response(external.run_observe(run=run).model_dump(mode="json"))


router.route("/api/runs/{run_id}/actions", post=run_act)
router.route("/api/runs/{run_id}/actions/{step_id}", get=run_action_get)
router.route("/api/runs/{run_id}/observation", get=run_observation)


# --- What happened: steps, events, artifacts --------------------------------------------


def _after_param(request: HttpRequest) -> int | None:
    return _int_param(request, "after", 0, 0, 10**12) if "after" in request.GET else None


@operation(
    summary="The run's steps in order: tool, secret-free arguments, state, result, times, artifact ids",
    auth=READER_KEYS,
    responses={200: StepList, 400: "Invalid after or limit.", 404: "No such run."},
    query={
        "after": integer_query("the index of the last step already read (steps after it); default: from the first", 0, 10**12),
        "limit": integer_query("1-100, default 50", 1, 100),
    },
)
def run_steps(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    page = selectors.steps_page(run=run, after=_after_param(request), limit=_int_param(request, "limit", 50, 1, 100))
    return json_response(page.model_dump(mode="json"))


@operation(
    summary="The run's append-only, secret-free events, oldest first",
    auth=READER_KEYS,
    responses={200: EventList, 400: "Invalid after or limit.", 404: "No such run."},
    query={
        "after": integer_query("the id of the last event already read (events after it); default: from the first", 0, 10**12),
        "limit": integer_query("1-500, default 100", 1, 500),
    },
)
def run_events(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    page = selectors.events_page(run=run, after=_after_param(request), limit=_int_param(request, "limit", 100, 1, 500))
    return json_response(page.model_dump(mode="json"))


@operation(
    summary=(
        "A stored artifact of the key's account: a masked screenshot (PNG; password and typed-into fields "
        "blurred), a file the computer downloaded, or a file uploaded for the upload tool"
    ),
    auth=RUNNER_KEY,
    responses={
        200: (
            "The bytes, with their content type (a screenshot: image/png, or image/jpeg for older captures); "
            "a download or upload comes as an attachment with its file name and its SHA-256 in Repr-Digest."
        ),
        404: "No such artifact in this account.",
    },
    # The artifact's own type: a PNG, a downloaded PDF, an uploaded JSON file...
    media_type="*/*",
)
def artifact_get(request: HttpRequest, *, key: ApiKey, artifact_id: str) -> HttpResponse:
    artifact = selectors.artifact_for_account(account=key.account, artifact_id=artifact_id)
    response = HttpResponse(artifact.data, content_type=artifact.content_type)
    # A downloaded page's HTML must never run on RAM's origin: an attachment, not sniffed, sandboxed.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    if artifact.filename:
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=artifact.filename)
    if artifact.sha256:
        response["Repr-Digest"] = f"sha-256=:{base64.b64encode(bytes.fromhex(artifact.sha256)).decode()}:"
    return response


@operation(
    summary="Upload a file of the account for the upload tool (size- and type-limited)",
    auth=RUNNER_KEY,
    raw_body=(
        "The file's bytes; Content-Type is its type (one of RAM_UPLOAD_CONTENT_TYPES), at most "
        "RAM_UPLOAD_MAX_BYTES. Types with a known signature (PDF, PNG, JPEG, GIF, WebP, ZIP, Office) must begin with it."
    ),
    query={
        "filename": Query(
            "the file's name as the page will see it (no path, no control or format characters, no leading or "
            "trailing space or dot; 1-255 characters)",
            {"type": "string", "minLength": 1, "maxLength": 255, "pattern": FILENAME_PATTERN},
            required=True,
        )
    },
    responses={
        201: ArtifactOut,
        400: "Missing or invalid filename, or an empty file.",
        413: "Larger than RAM_UPLOAD_MAX_BYTES.",
        415: "A content type that is not accepted, or bytes that are not of it.",
    },
)
def artifact_upload(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    length = request.headers.get("Content-Length", "")
    artifact = files.upload_store(
        account=key.account,
        stream=request,  # type: ignore[arg-type]
        filename=request.GET.get("filename", ""),
        content_type=files.upload_media_type(request.headers.get("Content-Type", "")),
        length=int(length) if length.isdigit() else None,
    )
    return json_response(selectors.artifact_out(artifact).model_dump(mode="json"), status=201)


router.route("/api/runs/{run_id}/steps", get=run_steps)
router.route("/api/runs/{run_id}/events", get=run_events)
router.route("/api/artifacts", post=artifact_upload)
router.route("/api/artifacts/{artifact_id}", get=artifact_get)
