"""The computer's open pages (tabs) and which one is active.

The active page is the one the screen stream shows, a person's inputs reach and the
agent's actions act on. A page the page itself opens (``window.open``, a
``target=_blank`` link, an OAuth or 3-D Secure popup) becomes active at once; when the
active page closes, the page that opened it becomes active again (or the one active
before it). Ids are short and never reused within an executor generation (``t1``,
``t2``…), so a stale id never reaches another page.

Pure bookkeeping: the runtime attaches the pages and moves the screencast.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Page

# A page that opens popups in a loop cannot exhaust the computer: a page opened beyond
# this many is closed at once.
MAX_TABS = 20
MAX_TITLE_CHARS = 300
MAX_URL_CHARS = 4096


@dataclass
class Tabs:
    pages: dict[str, Page] = field(default_factory=dict)
    ids: dict[Page, str] = field(default_factory=dict)
    # Most recently active last.
    history: list[str] = field(default_factory=list)
    # The page that opened each one (a popup's opener), to go back to when it closes.
    openers: dict[str, Page] = field(default_factory=dict)
    active_id: str | None = None
    next_number: int = 1
    # The last title read from each page: a page a dialog blocks answers nothing, its title stays known.
    titles: dict[str, str] = field(default_factory=dict)

    def add(self, page: Page) -> str:
        tab_id = f"t{self.next_number}"
        self.next_number += 1
        self.pages[tab_id] = page
        self.ids[page] = tab_id
        return tab_id

    def full(self) -> bool:
        return len(self.pages) >= MAX_TABS

    def id_of(self, page: Page) -> str | None:
        return self.ids.get(page)

    def get(self, tab_id: str) -> Page | None:
        return self.pages.get(tab_id)

    @property
    def active(self) -> Page | None:
        return self.pages.get(self.active_id) if self.active_id else None

    def activate(self, tab_id: str) -> None:
        self.active_id = tab_id
        with contextlib.suppress(ValueError):
            self.history.remove(tab_id)
        self.history.append(tab_id)

    def remove(self, page: Page) -> str | None:
        """Forget ``page``; the id of the page to activate when it was the active one (None otherwise)."""
        tab_id = self.ids.pop(page, None)
        if tab_id is None:
            return None
        self.pages.pop(tab_id, None)
        self.titles.pop(tab_id, None)
        opener = self.openers.pop(tab_id, None)
        with contextlib.suppress(ValueError):
            self.history.remove(tab_id)
        if tab_id != self.active_id:
            return None
        self.active_id = None
        opener_id = self.ids.get(opener) if opener is not None else None
        if opener_id is not None:
            return opener_id
        return self.history[-1] if self.history else None

    def clear(self) -> None:
        self.pages.clear()
        self.ids.clear()
        self.history.clear()
        self.openers.clear()
        self.titles.clear()
        self.active_id = None

    async def describe(self, blocked: frozenset[Page] = frozenset()) -> list[dict[str, Any]]:
        """Each open page in opening order: id, title, url, active (titles and URLs bounded).

        A page in ``blocked`` (a JavaScript dialog waits on it) answers nothing: its last known
        title is given; a page that does not answer within a second likewise."""
        listed = []
        for tab_id, page in list(self.pages.items()):
            title = self.titles.get(tab_id, "")
            if page not in blocked:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1):
                        title = self.titles[tab_id] = await page.title()
            listed.append(
                {
                    "id": tab_id,
                    "title": str(title)[:MAX_TITLE_CHARS],
                    "url": page.url[:MAX_URL_CHARS],
                    "active": tab_id == self.active_id,
                }
            )
        return listed
