"""``python manage.py executor_token --computer ID``: issue (or rotate) a computer's executor token."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from computers.models import Computer
from computers.services import executor_token_issue


class Command(BaseCommand):
    help = (
        "Issue a new executor token (ram_ex_...) for one computer and print it once; the previous one stops "
        "working at once. Give it to that computer's executor as RAM_EXECUTOR_TOKEN."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--computer", required=True, help="the Computer id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            token = executor_token_issue(computer_id=options["computer"])
        except Computer.DoesNotExist:
            raise CommandError(f"No computer {options['computer']!r}.") from None
        self.stdout.write(token)
