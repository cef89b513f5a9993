"""Storage of diagnostic captures (already masked by the caller)."""

from __future__ import annotations

import uuid

from django.db import connection

from executor.models import DiagnosticArtifact

MAX_DIAGNOSTIC_BYTES = 8 * 1024 * 1024


def diagnostic_store(*, computer_id: str, content_type: str, data: bytes) -> uuid.UUID:
    """Called from the executor's worker threads, which keep no connection open."""
    if len(data) > MAX_DIAGNOSTIC_BYTES:
        raise ValueError("diagnostic capture too large")
    try:
        return DiagnosticArtifact.objects.create(computer_id=computer_id, content_type=content_type, data=data).id
    finally:
        connection.close()
