"""Named errors of runs; each edge maps their category to a status (``core.errors``)."""

from core.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable, Unprocessable, UpstreamFailed


class RunNotFound(NotFound):
    """Also for another account's run: the two are indistinguishable."""

    code = "run.not_found"
    message_default = "No such run."


class ArtifactNotFound(NotFound):
    """Also for another account's capture, or one past its retention: the three are indistinguishable."""

    code = "artifact.not_found"
    message_default = "No such artifact."


class ComputerNotFound(NotFound):
    code = "computer.not_found"
    message_default = "No such computer in this account."


class InterventionNotFound(NotFound):
    code = "intervention.not_found"
    message_default = "This intervention is not available."


class ConnectionRequestNotFound(NotFound):
    code = "connection_request.not_found"
    message_default = "No such connection request."


class InvalidFilter(InvalidInput):
    code = "runs.invalid_filter"


class AgentUnavailable(Unprocessable):
    """A valid agent type this server is not configured for (the schema lists every type)."""

    code = "run.agent_unavailable"
    message_default = "The openai_compatible agent is not configured on this server (RAM_LLM_BASE_URL)."


class BrowserProviderMismatch(InvalidInput):
    """``agent.browser.provider`` names another provider than the computer's browser backend."""

    code = "run.browser_provider_mismatch"


class NothingToDo(InvalidInput):
    """A scripted run whose task has no steps: the scripted agent plays ``task.steps`` and nothing else."""

    code = "run.nothing_to_do"
    message_default = (
        "The scripted agent (the default agent) only plays task.steps, and this task has none: there is "
        "nothing for it to do. Give task.steps (tool calls to play), or choose another agent: "
        'agent.type "external" (your harness sends each action, POST /api/runs/{id}/actions) or '
        '"openai_compatible" (a model decides, where the server has RAM_LLM_BASE_URL).'
    )


class UnknownTool(InvalidInput):
    code = "tool.unknown"


class RunNotPaused(Conflict):
    code = "run.not_paused"
    message_default = "The run is not paused waiting for input; there is nothing to continue."


class RunCancelled(Conflict):
    code = "run.cancelled"
    message_default = "The run was cancelled and cannot be continued."


class RunFinished(Conflict):
    code = "run.finished"


class ContinuationConflict(Conflict):
    """The run was already continued (``continued_run_id``), or another request is continuing it."""

    code = "run.already_continued"


class IdempotencyKeyReused(Unprocessable):
    code = "run.idempotency_key_reused"
    message_default = "This idempotency_key was already used with a different request."


class CreditsShort(Conflict):
    code = "credits.short"


class InterventionUnavailable(Conflict):
    """The run's intervention cannot be acted on now (cancelled, continued, expired, revoked binding...)."""

    code = "intervention.unavailable"


class NoInterventionPage(Conflict):
    """A pause kind resolved without a person's page (continue, credits)."""

    code = "intervention.none_for_kind"


class CredentialFormAlreadyOpened(Conflict):
    code = "credential.form_already_opened"
    message_default = (
        "The form for this request was already opened, and it is issued only once. Use the form already open "
        "before its deadline, or cancel the task and ask for a new request."
    )


class CredentialRequestExpired(Conflict):
    code = "credential.request_expired"
    message_default = "This credential request expired. Cancel the task and ask for a new request."


class CredentialRequestConflict(Conflict):
    """Not waiting for a credential, already saved, form not opened, or changed while saving."""

    code = "credential.request_conflict"


class InviteInvalid(Forbidden):
    code = "credential.invite_invalid"
    message_default = "This form has no valid invite; open it from the task's intervention page."


class VaultRefusedForm(Forbidden):
    code = "credential.vault_refused"
    message_default = (
        "The vault refused this form: it was already used, expired or was withdrawn. "
        "Check the task; cancel it and ask for a new request if the credential is still needed."
    )


class VaultDown(Unavailable):
    code = "vault.unavailable"


class ConnectionRequestConflict(Conflict):
    code = "connection_request.conflict"


class GoogleNotConfigured(Unavailable):
    code = "google.not_configured"
    message_default = "Google authorization is not configured on this server (RAM_GOOGLE_CLIENT_ID)."


class GoogleFailed(UpstreamFailed):
    code = "google.failed"


class StoredCredentialNotFound(NotFound):
    """Also for another account's credential: the two are indistinguishable."""

    code = "stored_credential.not_found"
    message_default = "No such stored credential in your account."


class ReplacementFormNotFound(NotFound):
    code = "credential_replacement.not_found"
    message_default = "No such credential form."


class ReplacementFormConflict(Conflict):
    """The replacement form was used, expired, or its credential was deleted meanwhile."""

    code = "credential_replacement.conflict"


class ScreenshotNotFound(NotFound):
    code = "screenshot.not_found"
    message_default = "No such screenshot."


class RunBindingChanged(Conflict):
    """The run's (account, computer, computer binding) no longer holds: the run fails and says so."""

    code = "run.binding_changed"
    message_default = (
        "The run's computer binding changed (the computer was moved, revoked or removed); "
        "the run cannot use it any more."
    )


class CredentialIdUnstorable(Conflict):
    """A request names a credential id the vault cannot store: refused before the one-time claim."""

    code = "credential.id_unstorable"
    message_default = "This request names a credential id that cannot be stored; cancel the task and ask for a new request."


class CredentialReplaceUnconfirmed(InvalidInput):
    """Saving would overwrite a credential stored for another request, and the person did not confirm."""

    code = "credential.replace_unconfirmed"
    message_default = (
        "A credential is already stored under this id for another request. Saving replaces it: "
        "confirm that on the form, or cancel the task if it should not be replaced."
    )


class NoViewer(Conflict):
    code = "run.no_viewer"
    message_default = "No viewer is available: the run has no computer assigned to your account."


# --- Bring your own agent: actions of an external agent's harness ------------------
# These carry their ``code`` on the wire, so a harness can branch on it.


class NotExternalRun(Conflict):
    code = "run.not_external"
    message_default = 'Only a run created with agent type "external" takes actions.'

    def __init__(self, message: str | None = None, **extra: object) -> None:
        super().__init__(message, code=self.code, **extra)


class RunNotTakingActions(Conflict):
    """Waiting for input (see ``required_action``), finished, cancelled or continued."""

    code = "run.not_taking_actions"

    def __init__(self, message: str | None = None, **extra: object) -> None:
        super().__init__(message, code=self.code, **extra)


class ActionInProgress(Conflict):
    """Another action of the run is still running: one action at a time."""

    code = "run.action_in_progress"

    def __init__(self, message: str | None = None, **extra: object) -> None:
        super().__init__(message, code=self.code, **extra)


class ComputerDraining(Unavailable):
    """The run's computer is draining for its executor's restart: no step is recorded, nothing charged."""

    code = "run.computer_draining"
    message_default = (
        "The run's computer is draining for a restart of its executor; nothing was recorded or charged. "
        "Retry the action once the computer is back (its runs resume by themselves)."
    )

    def __init__(self, message: str | None = None, **extra: object) -> None:
        super().__init__(message, code=self.code, **extra)


class InvalidAction(InvalidInput):
    code = "run.invalid_action"

    def __init__(self, message: str | None = None, **extra: object) -> None:
        super().__init__(message, code=self.code, **extra)


class StepNotFound(NotFound):
    code = "run.step_not_found"
    message_default = "No such step in this run."
