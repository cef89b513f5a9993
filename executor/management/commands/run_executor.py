"""``python manage.py run_executor --computer ID``: one Chromium for one computer."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from executor.models import Computer
from executor.profile import Owner, Profile
from executor.runtime import Executor
from executor.sandbox import NO_SANDBOX_WARNING, SandboxUnavailable, prepare_browser_identity


class Command(BaseCommand):
    help = "Run the executor of one computer: Chromium, screencast, control grant, private interface."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--computer", required=True, help="the Computer id")
        parser.add_argument("--host", default="127.0.0.1", help="a loopback or private address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not Computer.objects.filter(pk=options["computer"]).exists():
            raise CommandError(f"No computer {options['computer']!r}.")
        try:
            identity = prepare_browser_identity()
        except SandboxUnavailable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"The computer's browser: {identity.describe()}.")
        if not identity.sandbox:
            self.stderr.write(f"WARNING: {NO_SANDBOX_WARNING}")
        # The computer's browser profile persists on disk, owned by the browser's user.
        profile = Profile(
            root=Path(settings.RAM_BROWSER_PROFILE_DIR),
            computer_id=options["computer"],
            owner=Owner.for_user(identity.user),
        )
        executor = Executor(
            computer_id=options["computer"],
            host=options["host"],
            port=options["port"],
            sandbox=identity.sandbox,
            profile=profile,
        )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, executor.stop)
            await executor.serve()

        asyncio.run(main())
        if executor.failed:
            raise CommandError("The browser failed; restart the executor (a new generation).")
