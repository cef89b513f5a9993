"""Storage of ``browser_login``'s diagnostic captures (already masked by the caller)."""

from __future__ import annotations

import uuid

from executor.artifacts import artifact_store_from_thread
from executor.models import DiagnosticArtifact


def diagnostic_store(*, computer_id: str, content_type: str, data: bytes) -> uuid.UUID:
    """Called from the executor's worker threads, which keep no connection open."""
    return artifact_store_from_thread(
        computer_id=computer_id, kind=DiagnosticArtifact.Kind.DIAGNOSTIC, data=data, content_type=content_type
    )
