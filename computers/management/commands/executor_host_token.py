"""``python manage.py executor_host_token --host NAME``: issue (or rotate) an executor host's token."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from computers.models import ExecutorHost
from computers.placement import host_token_issue


class Command(BaseCommand):
    help = (
        "Issue a new executor host token (ram_host_...) and print it once; the previous one stops working at "
        "once. Give it to that machine's `manage.py run_executor_host` as RAM_HOST_TOKEN."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", required=True, help="the host's name (1-64 letters, digits, _, . or -)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            ExecutorHost(pk=options["host"]).clean_fields(exclude=["token_digest", "capacity", "health", "last_seen_at"])
        except ValidationError as exc:
            raise CommandError(f"Invalid host name: {'; '.join(exc.messages)}") from None
        self.stdout.write(host_token_issue(host_id=options["host"]))
