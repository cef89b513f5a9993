"""What the computer's pages wait on and nobody answered yet: the JavaScript dialogs
(``alert``, ``confirm``, ``prompt``, ``beforeunload``) and the HTTP sign-in prompts
(``auth``: a site's basic-auth challenge, held by ``executor/auth_prompts.py``).

A dialog blocks its page until it is answered: Playwright never dismisses it on its own
here (the runtime listens for every dialog), so it waits for a person with control (the
overlay on ``/view``) or the agent (``dialog_answer``; ``auth_answer`` for a sign-in
prompt). Ids are short and never reused within an executor generation (``d1``, ``d2``…),
so a stale answer never reaches another dialog. The message is the page's own text,
bounded; a prompt's default text likewise. A sign-in prompt shows the origin that asked
(``scheme://host:port`` as the browser reports it: never a path, a query or a userinfo)
and the realm it named (the site's own text, bounded).

Bookkeeping: the runtime listens for the dialogs, checks each answer and passes it on here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Dialog, Page

from executor.auth_prompts import Challenge

MAX_MESSAGE_CHARS = 1000
MAX_DEFAULT_CHARS = 1000
# A page that opens dialogs from several tabs at once cannot grow the list without end.
MAX_PENDING = 20
KINDS = ("alert", "confirm", "prompt", "beforeunload")
AUTH = "auth"


@dataclass
class Pending:
    id: str
    page: Page
    tab: str
    kind: str
    message: str = ""
    default_text: str = ""
    # The JavaScript dialog, or the sign-in challenge (exactly one of them).
    dialog: Dialog | None = None
    challenge: Challenge | None = None
    opened_at: float = field(default_factory=time.time)

    async def answer(self, *, accept: bool, text: str | None, credentials: tuple[str, str] | None) -> None:
        """Give the browser the answer (the runtime checked that it fits the kind)."""
        if self.challenge is not None:
            await self.challenge.answer(credentials if accept else None)
        elif self.dialog is None:
            return
        elif accept and self.kind == "prompt":
            # Without text, a prompt keeps its default answer (as OK in a browser does).
            await self.dialog.accept(text if text is not None else self.dialog.default_value)
        elif accept:
            await self.dialog.accept()
        else:
            await self.dialog.dismiss()

    def describe(self) -> dict[str, Any]:
        if self.challenge is not None:
            return {
                "id": self.id,
                "tab": self.tab,
                "kind": AUTH,
                "origin": self.challenge.origin,
                "realm": self.challenge.realm,
                "opened_at": self.opened_at,
            }
        return {
            "id": self.id,
            "tab": self.tab,
            "kind": self.kind,
            "message": self.message,
            "default_text": self.default_text,
            "opened_at": self.opened_at,
        }


@dataclass
class Dialogs:
    pending: dict[str, Pending] = field(default_factory=dict)
    next_number: int = 1

    def _next_id(self) -> str:
        number, self.next_number = self.next_number, self.next_number + 1
        return f"d{number}"

    def add(self, dialog: Dialog, page: Page, tab: str) -> Pending:
        kind = dialog.type if dialog.type in KINDS else "alert"
        entry = Pending(
            id=self._next_id(),
            dialog=dialog,
            page=page,
            tab=tab,
            kind=kind,
            message=str(dialog.message or "")[:MAX_MESSAGE_CHARS],
            default_text=str(dialog.default_value or "")[:MAX_DEFAULT_CHARS] if kind == "prompt" else "",
        )
        self.pending[entry.id] = entry
        return entry

    def add_auth(self, challenge: Challenge, page: Page, tab: str) -> Pending:
        entry = Pending(id=self._next_id(), page=page, tab=tab, kind=AUTH, challenge=challenge)
        self.pending[entry.id] = entry
        return entry

    def full(self) -> bool:
        return len(self.pending) >= MAX_PENDING

    def get(self, dialog_id: str) -> Pending | None:
        return self.pending.get(dialog_id)

    def on_page(self, page: Page) -> Pending | None:
        """The dialog blocking ``page`` (a page shows one at a time), if any."""
        return next((p for p in self.pending.values() if p.page is page), None)

    def forget(self, dialog_id: str) -> Pending | None:
        return self.pending.pop(dialog_id, None)

    def forget_page(self, page: Page) -> bool:
        """A closed page's dialogs are gone with it; True when there were any."""
        gone = [key for key, p in self.pending.items() if p.page is page]
        for key in gone:
            del self.pending[key]
        return bool(gone)

    def clear(self) -> None:
        self.pending.clear()

    def describe(self) -> list[dict[str, Any]]:
        """Each unanswered dialog, oldest first: id, tab, kind, then message, default_text (a
        JavaScript dialog) or origin, realm (a sign-in prompt), and opened_at."""
        return [p.describe() for p in self.pending.values()]
