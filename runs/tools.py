"""The agent's tools: one ``Tool`` record per tool, in one registry.

Each record holds the tool's one argument model, whether it drives the
browser (then it names its executor action, and its argument model *is* that
action's model), what the model is told about it, its secret-free summary for
the step record and events, how the executor's reply becomes the model-visible
result, and — for a tool that only changes the run — its outcome (finish,
fail, or a pause of a kind in ``runs/pauses/``).

Everything else reads this registry: run creation (``runs.tool_calls``:
``ToolCall`` and the bodies that create a run), the run loop, the
OpenAI-compatible agent's tool schemas, the MCP ``run_create`` schema and the
tool table of docs/agents.md (``make docs``), all derived from it.

Adding a tool is one ``Tool`` entry below, plus — when it drives the browser — its
executor action in ``executor/actions.py`` and that action's reply model in
``executor/ops.py`` (which its ``result`` reads), plus its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.utils import timezone
from prometheus_client import Counter
from pydantic import (
    BaseModel,
)

from computers.client import ExecutorError
from core.metrics import BROWSER_LOGIN_OUTCOMES
from executor import contracts as executor_contracts
from executor import ops
from executor.login_codes import EXECUTOR_UNAVAILABLE, LOGIN_TIMEOUT, not_completed
from executor.wire import BROWSER_LOGIN_MARGIN_SECONDS, CALL_TIMEOUT_SECONDS
from runs.contracts import ToolResult
from runs.models import Run, RunStep, StoredCredential
from runs.page_words import dialogs_summary, tabs_summary, without_query
from runs.run_tools import (
    Fail,
    FailArgs,
    Finish,
    FinishArgs,
    Outcome,
    Pause,
    RequestConnectionArgs,
    RequestCredentialArgs,
    RequestTakeoverArgs,
)
from vault_bridge.credentials import VaultRefused, VaultUnavailable, account_read_grant

# --- The record ------------------------------------------------------------------


def _summary_plain(name: str, args: BaseModel) -> dict[str, Any]:
    return {"tool": name, **args.model_dump(mode="json", exclude_unset=True)}


def _reply_done(reply: ops.ActionReply) -> ToolResult:
    return ToolResult(content="Done.")


def _no_context(run: Run) -> dict[str, Any] | None:
    return None


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[BaseModel]
    # What the model is told (OpenAI-compatible agent, MCP schema) and docs/agents.md says.
    description: str
    # The "arguments" column of docs/agents.md's tool table.
    arguments_doc: str
    # The executor action a browser tool runs under a lease (its argument model is ``args``).
    action: str | None = None
    # A secret-free description of a call for the step record and events.
    summary: Callable[[str, Any], dict[str, Any]] = _summary_plain
    # How the executor's reply becomes what the model sees (browser tools): it takes the action's
    # reply model of ``executor.ops.ACTION_REPLIES`` (tests/executor/test_ops.py checks each one).
    result: Callable[[Any], ToolResult] = _reply_done
    # The run's settings the executor action needs besides the arguments (never from the model).
    context: Callable[[Run], dict[str, Any] | None] = _no_context
    # The worker's wait for one call of the action.
    timeout_seconds: Callable[[], float] = lambda: CALL_TIMEOUT_SECONDS
    # An end-to-end budget counted from the start of the tool call in the worker (its lease and
    # context included): the executor gets what is left (``budget_seconds`` in the context) and the
    # worker's calls end within the budget plus ``BROWSER_LOGIN_MARGIN_SECONDS``.
    budget_seconds: Callable[[], float] | None = None
    # What a tool that does not drive the browser does to the run (a tool that pauses names its kind
    # in ``pauses`` instead).
    outcome: Callable[[Any], Outcome] | None = None
    # The pause kind of ``runs/pauses/`` the tool opens with its arguments, if it pauses the run.
    pauses: str | None = None
    # The argument fields whose value may be private (what ``type`` types, a prompt's answer): never in
    # a step record or event (its summary keeps only a length), emptied from the run's task once its
    # step runs, never shown to ``task_observer`` keys, shown to staff only as a length.
    private: tuple[str, ...] = ()
    # What the model is told when the executor could not be reached, failed, did not answer in time,
    # or its answer was lost (default: the executor's message, category unprocessable).
    executor_failure: Callable[[ExecutorError], ToolResult] | None = None
    # A step that may navigate or type is followed by a masked screenshot (its artifact_id in the
    # result); this names the fields the step typed into, blurred besides the run's other typed-into fields.
    capture: Callable[[Any], list[str]] | None = None
    # What a step of this tool that succeeded also records, in the transaction that settles it, from
    # the run (row locked) and the call's arguments as sent (browser_login: the credential it typed is
    # shown as last used by the run). The loop and external runs call it; neither names a tool.
    settled: Callable[[Run, dict[str, Any]], None] | None = None
    # A counter of this tool's outcomes by result code (a ``code`` label), besides every step's duration.
    outcomes: Counter | None = None

    @property
    def browser(self) -> bool:
        return self.action is not None

    def outcome_of(self, args: BaseModel) -> Outcome | None:
        """What calling this tool with ``args`` does to the run (``None``: it drives the browser)."""
        if self.pauses is not None:
            return Pause(self.pauses, args)
        return self.outcome(args) if self.outcome is not None else None


# --- Summaries and results --------------------------------------------------------


def _summary_navigate(name: str, args: executor_contracts.NavigateArgs) -> dict[str, Any]:
    return {"tool": name, "url": without_query(args.url)}


def _summary_type(name: str, args: executor_contracts.TypeArgs) -> dict[str, Any]:
    # The typed text is never recorded: only its length.
    return {"tool": name, "selector": args.selector, "characters": len(args.text)}


def _summary_login(name: str, args: executor_contracts.BrowserLoginArgs) -> dict[str, Any]:
    return {"tool": name, "credential": args.credentialId}


def _summary_name_only(name: str, args: BaseModel) -> dict[str, Any]:
    return {"tool": name}


def _reply_navigated(reply: ops.NavigateReply) -> ToolResult:
    return ToolResult(content=f"Navigated; the page is {without_query(reply.url)}.")


def _reply_text(reply: ops.ExtractTextReply) -> ToolResult:
    text = reply.text
    limit = settings.RAM_TOOL_RESULT_MAX_CHARS
    suffix = " [truncated]" if reply.truncated or len(text) > limit else ""
    return ToolResult(content=text[:limit] + suffix)


def _reply_selected(reply: ops.SelectOptionReply) -> ToolResult:
    return ToolResult(content=f"Selected the option {reply.label!r} (value {reply.value!r}).")


def _reply_scrolled(reply: ops.ScrollReply) -> ToolResult:
    return ToolResult(content=f"Scrolled; the page is now at x={reply.scroll_x}, y={reply.scroll_y}.")


def _reply_tabs(reply: ops.TabsActionReply) -> ToolResult:
    return ToolResult(content=f"Open tabs: {tabs_summary([t.model_dump() for t in reply.tabs])}.")


def _summary_dialog(name: str, args: executor_contracts.DialogAnswerArgs) -> dict[str, Any]:
    # A prompt's answer is never recorded: only its length.
    summary: dict[str, Any] = {"tool": name, "accept": args.accept}
    if args.dialog is not None:
        summary["dialog"] = args.dialog
    if args.text is not None:
        summary["characters"] = len(args.text)
    return summary


def _reply_dialog(reply: ops.DialogAnswerReply) -> ToolResult:
    answered = reply.answered
    verb = "Accepted" if answered.accepted else "Dismissed"
    waiting = [d.model_dump() for d in reply.dialogs]
    more = f" Still waiting: {dialogs_summary(waiting)}." if waiting else ""
    return ToolResult(content=f"{verb} the {answered.kind} dialog {answered.dialog}.{more}")


def _summary_auth(name: str, args: executor_contracts.AuthAnswerArgs) -> dict[str, Any]:
    summary: dict[str, Any] = {"tool": name, "accept": args.accept}
    if args.credentialId is not None:
        summary["credential"] = args.credentialId
    if args.dialog is not None:
        summary["dialog"] = args.dialog
    return summary


AUTH_OUTCOMES = {
    "signed_in": "The site answered and the page loaded",
    "sent": "The site has not answered yet",
    "asked_again": "The site refused it and asks again",
    "dialog": "The page then opened a dialog",
}


def _reply_auth(reply: ops.AuthAnswerReply) -> ToolResult:
    if reply.tool_result is not None:
        return login_tool_result(reply.tool_result)
    # The reply's model holds answered and dialogs whenever it holds no tool result.
    answered = reply.answered
    if answered is None or reply.dialogs is None:
        raise TypeError("an auth_answer reply without answered and dialogs")  # its model refuses it
    waiting = [d.model_dump() for d in reply.dialogs]
    more = f" Waiting: {dialogs_summary(waiting)}." if waiting else ""
    prompt = f"the sign-in prompt {answered.dialog} of {answered.origin}"
    where = f" The page is {without_query(answered.url)}." if answered.url else ""
    if not answered.accepted:
        return ToolResult(content=f"Cancelled {prompt}; the page shows the site's refusal.{where}{more}")
    outcome = AUTH_OUTCOMES.get(answered.outcome, AUTH_OUTCOMES["sent"])
    # A site that refuses the credential is a normal result, as a portal's refusal is for browser_login.
    return ToolResult(content=f"Answered {prompt} as {answered.username or ''}. {outcome}.{where}{more}")


def login_tool_result(result: ops.LoginToolResult) -> ToolResult:
    """The executor's login result as the model's tool result (its absent fields stay absent)."""
    return ToolResult.model_validate(result.model_dump(exclude_none=True))


def _reply_login(reply: ops.LoginReply) -> ToolResult:
    return login_tool_result(reply.tool_result)


def _reply_screenshot(reply: ops.ScreenshotReply) -> ToolResult:
    artifact_id = reply.artifact_id
    return ToolResult(
        content=f"Screenshot stored as artifact {artifact_id} (a PNG; secret fields masked, typed-into fields blurred).",
        artifact_id=artifact_id,
    )


def _summary_upload(name: str, args: executor_contracts.UploadArgs) -> dict[str, Any]:
    return {"tool": name, "selector": args.selector, "artifact_id": str(args.artifact_id)}


def _reply_uploaded(reply: ops.UploadReply) -> ToolResult:
    return ToolResult(
        content=(
            f"The file input now holds {reply.filename[:255]} "
            f"({reply.size} bytes, {reply.content_type})."
        )
    )


def _upload_context(run: Run) -> dict[str, Any]:
    """The run's account (the artifact is read for it only) and its binding, re-checked by the executor."""
    return {"account_id": str(run.account_id), "computer_binding": str(run.computer_binding or "")}


# A field focused when a key is pressed may hold what the keys typed.
FOCUSED_FIELD = "input:focus, textarea:focus, [contenteditable]:focus"
# How many of the run's typed-into fields (its own and those of the runs it continues) each capture blurs
# (secret fields — browser_login's username and password among them — are masked by executor/taint.py).
MAX_TYPED_FIELDS = 50


def typed_selectors(run: Run) -> list[str]:
    """The fields this run (and the runs it continues) typed into, newest first, and the focused field."""
    chain: list[Any] = []
    current: Run | None = run
    while current is not None and len(chain) < 20:
        chain.append(current.pk)
        current = current.continued_from
    rows = RunStep.objects.filter(run_id__in=chain, tool="type").order_by("-started_at", "-id").values_list(
        "summary", flat=True
    )[:MAX_TYPED_FIELDS]
    selectors = [str(summary["selector"]) for summary in rows if isinstance(summary, dict) and summary.get("selector")]
    return list(dict.fromkeys([*selectors, FOCUSED_FIELD]))


def capture_context(run: Run, extra: list[str] | None = None) -> dict[str, Any]:
    """The executor's ``screenshot`` context: every field to blur besides password fields."""
    return {"mask_selectors": list(dict.fromkeys([*(extra or []), *typed_selectors(run)]))[: MAX_TYPED_FIELDS + 10]}


def _login_executor_failure(exc: ExecutorError) -> ToolResult:
    """The budget ran out waiting for the computer: ``browser.login_timeout``, as the contract says of
    any login past its budget; the computer unreachable or failing: ``browser.executor_unavailable``."""
    if exc.reason == "timeout":
        what = (
            f"the login did not finish within the budget: the computer did not answer in time "
            f"({exc.message.rstrip('.')}); the credential may or may not have been submitted."
        )
        return ToolResult.model_validate(not_completed(LOGIN_TIMEOUT, what))
    what = f"the computer could not be reached or failed ({exc.message.rstrip('.')}); the credential may or may not have been submitted."
    return ToolResult.model_validate(not_completed(EXECUTOR_UNAVAILABLE, what))


def stored_credential_used(*, run: Run, credential_id: str) -> None:
    """``browser_login`` read the credential for ``run`` (``runs.credentials`` lists it as last used)."""
    StoredCredential.objects.filter(account_id=run.account_id, credential_id=credential_id).update(
        last_used_at=timezone.now(), last_used_run=run
    )


def _login_context(run: Run) -> dict[str, Any]:
    """The run's settings, its binding (the executor re-checks it before the read) and a one-use
    Vault grant that reads only the run's account's credentials: the executor holds no Vault token.
    ``browser_login`` and ``auth_answer`` read a credential this way."""
    try:
        grant = account_read_grant(account_id=run.account_id)
    except (VaultRefused, VaultUnavailable):
        grant = ""  # the executor answers browser.vault_unavailable and types nothing
    return {
        "browser": dict((run.agent_config or {}).get("browser", {})),
        "account_id": str(run.account_id),
        "computer_binding": str(run.computer_binding or ""),
        "vault_grant": grant,
    }


# --- The registry -------------------------------------------------------------------

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="navigate",
            args=executor_contracts.NavigateArgs,
            description="Open a URL in the computer's browser.",
            arguments_doc="`url` (absolute http(s), no embedded credentials, ≤ 4096)",
            action="navigate",
            summary=_summary_navigate,
            result=_reply_navigated,
            capture=lambda a: [],
        ),
        Tool(
            name="click",
            args=executor_contracts.ClickArgs,
            description="Click an element by CSS selector, or a point (x, y) of the 1280×720 viewport.",
            arguments_doc="`selector` (≤ 1000; value-blind CSS only while the page holds a secret), or `x` (0–1279) and `y` (0–719)",
            action="click",
            capture=lambda a: [],
        ),
        Tool(
            name="type",
            args=executor_contracts.TypeArgs,
            description="Fill an input with text (never a password: use browser_login).",
            arguments_doc="`selector`, `text` (≤ 4000 UTF-16 units; never logged: events record only its length)",
            action="type",
            summary=_summary_type,
            private=("text",),
            capture=lambda a: [a.selector],
        ),
        Tool(
            name="press",
            args=executor_contracts.PressArgs,
            description=(
                "Press one key: a single character or a named key such as Enter, Tab, ArrowDown or F5. While the "
                "focused field holds a secret (a password, a one-time code, a field browser_login or a person "
                "filled), only Tab and Escape are pressed: other keys are refused with "
                "browser.secret_field_focused."
            ),
            arguments_doc=(
                "`key` (one character or a named key: `Enter`, `Tab`, `ArrowUp`, `F1`…; only `Tab`/`Escape` on a "
                "focused field that holds a secret)"
            ),
            action="press",
            capture=lambda a: [FOCUSED_FIELD],
        ),
        Tool(
            name="scroll",
            args=executor_contracts.ScrollArgs,
            description="Turn the mouse wheel at the centre of the viewport by delta_x and delta_y pixels.",
            arguments_doc="`delta_x`, `delta_y` (pixels, each within ±2000; mouse wheel at the viewport's centre)",
            action="scroll",
            result=_reply_scrolled,
        ),
        Tool(
            name="select_option",
            args=ops.SelectOptionArgs,
            description=(
                "Choose an option of a <select> element: the one whose value, or whose visible label, is exactly "
                "the one given (give one of the two)."
            ),
            arguments_doc="`selector` (a `<select>`), and `value` or `label` (exact, ≤ 1000)",
            action="select_option",
            result=_reply_selected,
            capture=lambda a: [],
        ),
        Tool(
            name="wait_for",
            args=executor_contracts.WaitForArgs,
            description=(
                "Wait until an element matching the CSS selector is visible. While the page holds a secret "
                "(a filled password or one-time-code field, a field browser_login or a person filled), "
                "selectors must be value-blind CSS (no role=/text= engines, no [value], no :invalid): "
                "others are refused with browser.selector_value_dependent."
            ),
            arguments_doc="`selector` (value-blind CSS while the page holds a secret), `timeout_ms` (1–20000, default 10000)",
            action="wait_for",
        ),
        Tool(
            name="extract_text",
            args=executor_contracts.ExtractTextArgs,
            description="Read the visible text of an element (the whole page without a selector).",
            arguments_doc="`selector` (optional; value-blind CSS while the page holds a secret)",
            action="extract_text",
            result=_reply_text,
        ),
        Tool(
            name="screenshot",
            args=executor_contracts.ScreenshotArgs,
            description=(
                "Take a screenshot of the page, stored as a masked PNG artifact (secret fields masked, fields "
                "typed into blurred); the result names its artifact_id."
            ),
            arguments_doc="none (the harness reads the PNG with `GET /api/artifacts/{artifact_id}`)",
            action="screenshot",
            result=_reply_screenshot,
            context=capture_context,
        ),
        Tool(
            name="tabs_list",
            args=executor_contracts.TabsListArgs,
            description=(
                "List the browser's open tabs (popups and new windows a page opened): id, title and address; "
                "your actions act on the active one."
            ),
            arguments_doc="none",
            action="tabs_list",
            result=_reply_tabs,
        ),
        Tool(
            name="tab_switch",
            args=executor_contracts.TabArgs,
            description="Make another open tab the active one (the one your actions act on).",
            arguments_doc="`tab` (an id from `tabs_list`, such as `t2`)",
            action="tab_switch",
            result=_reply_tabs,
        ),
        Tool(
            name="tab_close",
            args=executor_contracts.TabArgs,
            description="Close an open tab; closing the active one makes its opener (or the previous tab) active.",
            arguments_doc="`tab` (an id from `tabs_list`)",
            action="tab_close",
            result=_reply_tabs,
        ),
        Tool(
            name="upload",
            args=executor_contracts.UploadArgs,
            description=(
                "Set a file input (an input of type file) of the page to a file the harness uploaded "
                "(its artifact_id); then submit the form as usual."
            ),
            arguments_doc=(
                "`selector` (the file input), `artifact_id` (from `POST /api/artifacts`, an upload of the run's account)"
            ),
            action="upload",
            summary=_summary_upload,
            result=_reply_uploaded,
            context=_upload_context,
        ),
        Tool(
            name="dialog_answer",
            args=executor_contracts.DialogAnswerArgs,
            description=(
                "Answer the dialog (alert, confirm, prompt, or 'leave this page?') the active tab shows: accept "
                "true presses OK or Leave, false Cancel or Stay; text answers a prompt. A dialog blocks its page: "
                "other actions are refused until it is answered. A site's sign-in prompt takes auth_answer."
            ),
            arguments_doc=(
                "`accept` (true: OK or Leave; false: Cancel or Stay), optional `text` (a prompt's answer, "
                "at most 4000 UTF-16 units), optional `dialog` (an id such as `d2`; default: the active tab's)"
            ),
            action="dialog_answer",
            summary=_summary_dialog,
            private=("text",),
            result=_reply_dialog,
        ),
        Tool(
            name="auth_answer",
            args=executor_contracts.AuthAnswerArgs,
            description=(
                "Answer a site's HTTP sign-in prompt (basic auth; the page waits for it): accept true signs in "
                "with a stored credentialId whose origins include exactly the origin that asks (the username and "
                "password never reach you), false cancels and shows the site's refusal."
            ),
            arguments_doc=(
                "`accept`, `credentialId` (with `accept` true only: a stored credential for exactly the prompt's "
                "origin), optional `dialog` (an id such as `d2`; default: the active tab's)"
            ),
            action="auth_answer",
            summary=_summary_auth,
            result=_reply_auth,
            context=_login_context,
            capture=lambda a: [],
        ),
        Tool(
            name="browser_login",
            args=executor_contracts.BrowserLoginArgs,
            description=(
                "Sign in to the current portal with a stored credential id; the username and password never "
                "reach you. Optional selectors name the username, password and submit controls."
            ),
            arguments_doc="`credentialId`, optional `usernameSelector`, `passwordSelector`, `submitSelector`",
            action="browser_login",
            summary=_summary_login,
            result=_reply_login,
            context=_login_context,
            # No answer, or a failure of the computer: an infrastructure failure, never a slow portal;
            # nothing is proven about the credential, and nothing repeats the call.
            executor_failure=_login_executor_failure,
            timeout_seconds=lambda: settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS + BROWSER_LOGIN_MARGIN_SECONDS,
            budget_seconds=lambda: settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS,
            # The credential was typed (signed in, or refused by the portal): shown as last used by this run.
            settled=lambda run, arguments: stored_credential_used(
                run=run, credential_id=str(arguments.get("credentialId", ""))
            ),
            outcomes=BROWSER_LOGIN_OUTCOMES,
        ),
        Tool(
            name="request_takeover",
            args=RequestTakeoverArgs,
            description="Ask a person to take control of the computer (a CAPTCHA, MFA, anything you cannot do).",
            arguments_doc="`reason`",
            pauses="takeover",
        ),
        Tool(
            name="request_credential",
            args=RequestCredentialArgs,
            description="Ask a person to save a portal credential in the vault; then continue with browser_login.",
            arguments_doc=(
                "`portal_origin`, `label`, optional `credential_id` (where the person's credential is stored; "
                "pass it to `browser_login` after continuing)"
            ),
            pauses="credential",
        ),
        Tool(
            name="request_connection",
            args=RequestConnectionArgs,
            description="Ask a person to authorize a Google connection with these capabilities.",
            arguments_doc="`capabilities` (Google)",
            pauses="connection",
        ),
        Tool(
            name="finish",
            args=FinishArgs,
            description="Finish the task with its answer.",
            arguments_doc="`output`",
            summary=_summary_name_only,
            outcome=lambda a: Finish(a.output),
        ),
        Tool(
            name="fail",
            args=FailArgs,
            description="Stop: the task cannot be done; say why.",
            arguments_doc="`error`",
            summary=_summary_name_only,
            outcome=lambda a: Fail(a.error),
        ),
    )
}

ToolName = Literal[tuple(TOOLS)]  # type: ignore[valid-type]


def tool_named(name: str) -> Tool:
    """The registered tool; a name that is not registered cannot be called or created."""
    try:
        return TOOLS[name]
    except KeyError:
        raise KeyError(f"No tool named {name!r} is registered.") from None
