"""Drain a computer before its executor restarts: no new step, wait for the ones in flight."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from computers.services import executor_drain_start
from runs.selectors import steps_in_flight


class Command(BaseCommand):
    help = (
        "Mark a computer as draining (the run loop takes no new step on it) and wait until no step "
        "is in flight; restart its executor then (a new generation ends the drain)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--computer", required=True)
        parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait for steps in flight")

    def handle(self, *args: Any, **options: Any) -> None:
        computer_id = options["computer"]
        if not executor_drain_start(computer_id=computer_id):
            raise CommandError(f"No computer {computer_id!r}.")
        deadline = time.monotonic() + options["wait"]
        while (in_flight := steps_in_flight(computer_id=computer_id)) and time.monotonic() < deadline:
            time.sleep(0.5)
        self.stdout.write(json.dumps({"computer_id": computer_id, "draining": True, "steps_in_flight": in_flight}))
        if in_flight:
            raise CommandError(f"{in_flight} step(s) still in flight after {options['wait']:.0f} s.")
