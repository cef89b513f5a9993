"""Server templates for what a person reads in an intervention.

Texts come from here, per intervention kind and reason, never from model
output: a model cannot place a link or an instruction in front of a person.
"""

from typing import NamedTuple


class InterventionTexts(NamedTuple):
    progress: str
    user_action: str
    next_step: str


_REASON_PROGRESS = {
    "authentication": "The task paused at a sign-in step.",
    "captcha": "The task paused at a CAPTCHA challenge.",
    "verification": "The task paused at a verification step (for example a one-time code).",
    "missing_information": "The task paused because it needs information it does not have.",
    "authorization_required": "The task paused because it needs your authorization.",
    "other": "The task paused and needs a person.",
}

_KIND_ACTION = {
    "human_control": (
        "Open the task's computer screen, take control, complete the step yourself, then release control.",
        "Check the screen shows the step is done, then ask for an explicit continuation of the task.",
    ),
    "credential": (
        "Open the protected form and save the credential for this portal.",
        "Saving stores the credential; it does not sign in. Check the task, then ask for an explicit continuation.",
    ),
    "google_connection": (
        "Open Connections, review the requested Google permissions and authorize them if you agree.",
        "Check the connection is authorized, then ask for an explicit continuation of the task.",
    ),
}

_SAVED = InterventionTexts(
    progress="The credential was saved in the vault. Nobody has signed in with it yet.",
    user_action="Nothing more is needed in the form. Sign-in, CAPTCHA or MFA may still need you on the computer.",
    next_step="Check the task, then ask for an explicit continuation; the task does not resume by itself.",
)


def intervention_texts(*, kind: str, reason: str, state: str) -> InterventionTexts:
    if kind == "credential" and state == "credential_saved":
        return _SAVED
    user_action, next_step = _KIND_ACTION[kind]
    return InterventionTexts(_REASON_PROGRESS.get(reason, _REASON_PROGRESS["other"]), user_action, next_step)
