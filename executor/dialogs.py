"""The JavaScript dialogs (``alert``, ``confirm``, ``prompt``, ``beforeunload``) the
computer's pages opened and nobody answered yet.

A dialog blocks its page until it is answered: Playwright never dismisses it on its own
here (the runtime listens for every dialog), so it waits for a person with control (the
overlay on ``/view``) or the agent (``dialog_answer``). Ids are short and never reused
within an executor generation (``d1``, ``d2``…), so a stale answer never reaches another
dialog. The message is the page's own text, bounded; a prompt's default text likewise.

Pure bookkeeping: the runtime listens for the dialogs and answers them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Dialog, Page

MAX_MESSAGE_CHARS = 1000
MAX_DEFAULT_CHARS = 1000
# A page that opens dialogs from several tabs at once cannot grow the list without end.
MAX_PENDING = 20
KINDS = ("alert", "confirm", "prompt", "beforeunload")


@dataclass
class Pending:
    id: str
    dialog: Dialog
    page: Page
    tab: str
    kind: str
    message: str
    default_text: str
    opened_at: float = field(default_factory=time.time)

    def describe(self) -> dict[str, Any]:
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

    def add(self, dialog: Dialog, page: Page, tab: str) -> Pending:
        kind = dialog.type if dialog.type in KINDS else "alert"
        entry = Pending(
            id=f"d{self.next_number}",
            dialog=dialog,
            page=page,
            tab=tab,
            kind=kind,
            message=str(dialog.message or "")[:MAX_MESSAGE_CHARS],
            default_text=str(dialog.default_value or "")[:MAX_DEFAULT_CHARS] if kind == "prompt" else "",
        )
        self.next_number += 1
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
        """Each unanswered dialog, oldest first: id, tab, kind, message, default_text, opened_at."""
        return [p.describe() for p in self.pending.values()]
