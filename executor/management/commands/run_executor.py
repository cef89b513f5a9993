"""``python manage.py run_executor --computer ID``: one Chromium for one computer.

The process needs no database: it reaches the server's state through the internal endpoint
(``RAM_SERVER_INTERNAL_URL``) with the computer's own executor token (``RAM_EXECUTOR_TOKEN``).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from executor.profile import Owner, Profile
from executor.runtime import Executor
from executor.sandbox import NO_SANDBOX_WARNING, SandboxUnavailable, prepare_browser_identity
from executor.server_link import HttpServerLink, LinkError


class Command(BaseCommand):
    help = "Run the executor of one computer: Chromium, screencast, control grant, private interface."
    # The model checks open a database connection (SQLite's features); an executor has no database.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--computer", required=True, help="the Computer id")
        parser.add_argument("--host", default="127.0.0.1", help="a loopback or private address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
        parser.add_argument("--server", default="", help="the server's internal URL (default RAM_SERVER_INTERNAL_URL)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.RAM_EXECUTOR_TOKEN:
            raise CommandError(
                "RAM_EXECUTOR_TOKEN must hold the computer's executor token "
                "(manage.py executor_token --computer ID issues one)."
            )
        server = HttpServerLink(
            base_url=options["server"] or settings.RAM_SERVER_INTERNAL_URL,
            computer_id=options["computer"],
            token=settings.RAM_EXECUTOR_TOKEN,
        )
        try:
            if asyncio.run(server.browser_config()) is None:
                raise CommandError(f"No computer {options['computer']!r}.")
        except LinkError as exc:
            raise CommandError(str(exc)) from None
        try:
            identity = prepare_browser_identity(options["computer"])
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
            server=server,
        )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, executor.stop)
            await executor.serve()

        asyncio.run(main())
        if executor.failed:
            raise CommandError("The browser failed; restart the executor (a new generation).")
