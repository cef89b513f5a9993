"""A deleted capture's stored file goes with its row (after the deletion commits)."""

from typing import Any

from django.db.models.signals import post_delete
from django.dispatch import receiver

from computers.artifacts import artifact_file_delete
from computers.models import DiagnosticArtifact


@receiver(post_delete, sender=DiagnosticArtifact)
def delete_stored_file(sender: Any, instance: DiagnosticArtifact, **kwargs: Any) -> None:
    if instance.storage_name:
        artifact_file_delete(instance.storage_name)
