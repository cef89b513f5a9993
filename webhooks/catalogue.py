"""What RAM delivers: the webhook event types, and the one table that says which
run event (``runs/state.py: run_event_append``) becomes which webhook type.

A run event kind that is not in ``RUN_EVENT_TYPES`` is never delivered. Adding a
webhook type is one entry in ``EVENT_TYPES`` (its description, shown in the API
reference and the admin), one in ``RUN_EVENT_TYPES`` and one in the contract's
``EventType``.
"""

from __future__ import annotations

EVENT_TYPES: dict[str, str] = {
    "run.queued": "A run was created (a new run, or the continuation of a paused one) and waits to start.",
    "run.started": "A run started on its computer.",
    "run.paused": "A run paused for a person; the payload carries its required_action.",
    "run.succeeded": "A run finished with its answer (read it with GET /api/runs/{run_id}).",
    "run.failed": "A run failed; the payload carries the error.",
    "run.cancelled": "A run was cancelled.",
    "run.continued": "A paused run was continued; the payload carries continued_run_id.",
    "intervention.credential_saved": "A person saved the credential a run asked for.",
    "intervention.control_taken": "A person took control of the run's computer.",
    "intervention.control_released": "A person handed control of the run's computer back.",
}

# Sent only by "send test event", to the one endpoint it names; endpoints do not subscribe to it.
TEST_EVENT_TYPE = "webhook.test"

# Run event kind -> webhook type. Kinds another part of RAM has not written yet map all the same:
# the table is the one place that decides, and an unwritten kind simply never fires. A run is
# announced ``run.queued`` once, by the first of its kinds (webhooks.services.ANNOUNCED_ONCE).
RUN_EVENT_TYPES: dict[str, str] = {
    "run_queued": "run.queued",
    "run_started": "run.started",
    "run_paused": "run.paused",
    "run_succeeded": "run.succeeded",
    "run_failed": "run.failed",
    "run_cancelled": "run.cancelled",
    "run_continued": "run.continued",
    "credential_saved": "intervention.credential_saved",
    "control_taken": "intervention.control_taken",
    "control_released": "intervention.control_released",
}
