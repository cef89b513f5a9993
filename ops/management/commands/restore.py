"""Restore a backup archive onto this machine (RAM's processes stopped)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ops.backup import BackupError, backup_restore


class Command(BaseCommand):
    help = "Restore a `manage.py backup` archive into a fresh database and embedded OpenBao; then run migrate."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("archive")
        parser.add_argument(
            "--replace", action="store_true", help="wipe the existing database and embedded OpenBao first"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            restored = backup_restore(archive_path=Path(options["archive"]), replace=options["replace"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            json.dumps(
                {
                    "restored": options["archive"],
                    "created_at": restored.manifest["created_at"],
                    "vault_restored": restored.vault_restored,
                    "counts": restored.manifest["counts"],
                }
            )
        )
