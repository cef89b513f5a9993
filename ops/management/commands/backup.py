"""Write a backup archive: database, embedded OpenBao snapshot, local keys, manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from ops.backup import BackupError, backup_create


class Command(BaseCommand):
    help = "Back up RAM into one archive (0600; it holds secrets): database, embedded OpenBao, local keys, manifest."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--output", default=None, help="archive path (default: var/backups/ram-<UTC time>.tar.gz)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        output = options["output"] or str(
            Path(settings.VAR_DIR) / "backups" / f"ram-{timezone.now():%Y%m%dT%H%M%SZ}.tar.gz"
        )
        try:
            manifest = backup_create(destination=Path(output))
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({"archive": output, "vault": manifest["vault"], "counts": manifest["counts"]}))
