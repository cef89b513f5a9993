"""Celery tasks of runs: thin, id-based wrappers around the run loop and sweeps."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task

from computers.artifacts import artifacts_sweep
from runs import credentials, external, loop, queue, services


@shared_task(name="runs.run_step", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_step(run_id: str) -> None:
    if loop.run_slice(run_id=uuid.UUID(run_id)):
        run_step.delay(run_id)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> dict[str, Any]:
    """Expire credential requests, replacement forms and old idempotency keys; start queued runs whose
    dispatch was lost; re-enqueue stalled runs; pause idle external runs; delete captures past their
    retention."""
    queue.queue_dispatch()  # admitted runs get their first step through ``run_admitted``
    stalled = loop.runs_resume_stalled()
    for run_id in stalled:
        run_step.delay(str(run_id))
    return {
        "expired_requests": services.credential_requests_expire(),
        "expired_replacements": credentials.credential_replacements_expire(),
        "expired_keys": services.idempotency_records_expire(),
        "stalled_runs": len(stalled),
        "idle_external_runs": external.external_runs_idle_pause(),
        "expired_artifacts": artifacts_sweep(),
    }
