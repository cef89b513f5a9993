"""The shared shapes of the proof: a table row, a profile, the running stack and an experiment.

An experiment is a callable ``(stack, profile) -> list[Row]``. It owns every fault it injects and
leaves the stack running (restarted where it killed something) for the next experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import requests


@dataclass(frozen=True)
class Row:
    """One line of the proof's table; ``held == tries`` means the row holds."""

    experiment: str
    tries: int
    held: int
    lost: int
    duplicated: int
    figure: str

    @property
    def holds(self) -> bool:
        return self.tries > 0 and self.held == self.tries and self.lost == 0 and self.duplicated == 0


@dataclass(frozen=True)
class Profile:
    name: str  # "short" | "full"
    repetitions: int  # faults: full >= 20, short small
    soak_seconds: int  # full 1800, short <= 300 (the short run must fit in 10 min)
    ws_messages: int  # full 10000, short ~1000
    broker_tasks: int  # tasks through the embedded broker: full 10000, short 1000


FULL = Profile(name="full", repetitions=20, soak_seconds=1800, ws_messages=10000, broker_tasks=10000)
SHORT = Profile(name="short", repetitions=2, soak_seconds=120, ws_messages=1000, broker_tasks=1000)
PROFILES = {"full": FULL, "short": SHORT}


class Stack(Protocol):
    """The running production topology, started by the proof itself (proof/stack.py)."""

    web_urls: list[str]  # two web processes, e.g. http://127.0.0.1:PORT (clients alternate)
    runner_key: str  # an API key with the runner role on the proof's account
    observer_key: str  # a task_observer key on the same account
    account_id: str
    computers: list[str]  # two computer ids, each with its own executor
    var_dir: Path  # the proof's own var/ (files to sweep)
    log_paths: list[Path]  # every log file of every process the proof started
    database_url: str  # the proof's own PostgreSQL
    redis_url: str  # the proof's own Redis
    vault_addr: str
    planted_secrets: list[str]  # every secret the proof planted (passwords, TOTP seeds, keys...)
    portal_url: str  # a local portal (login form + side-effect counter) reachable by the computers' browsers

    def plant(self, secret: str) -> None:
        """Remember a secret for the sweep."""

    def sign_in_person(self) -> requests.Session:
        """A signed-in person (password session) of the proof's account."""

    def next_url(self) -> str:
        """Alternate between web_urls."""


Experiment = Callable[[Stack, Profile], list[Row]]
