"""The browser's pages: its tabs, the active one, and the dialogs and sign-in prompts they wait on.

Every page of the computer's browser context is adopted as it opens (its downloads, dialogs,
sign-in challenges, taint tracking and title are followed); the active page is what the
screen shows, inputs reach and agent actions act on, and the screen feed follows it. Viewers
(the screen links) are told of every change of the tabs and of the dialogs waiting.
``Pages`` is the ``actions.Browser`` agent actions see beyond their page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from playwright.async_api import Dialog, Download, Page

from executor import ops, taint
from executor.auth_prompts import AuthWatch, Challenge
from executor.control import ControlError
from executor.dialogs import AUTH, Dialogs, Pending
from executor.feed import ScreenFeed
from executor.login_solvers import watch_console
from executor.rpc import RpcServer
from executor.tabs import Tabs

logger = logging.getLogger(__name__)

# After a sign-in answer: how long the agent's answer waits for the site's page to load (or to
# ask again), and, for a request other than the page's own document, for it to ask again.
AUTH_SETTLE_SECONDS = 7.0
AUTH_RECHALLENGE_SECONDS = 1.5


class Pages:
    """``context`` is the browser context in use (None while none is), ``stopping`` whether the
    browser is being closed on purpose, ``failed`` what a crash of the active page calls."""

    def __init__(
        self,
        *,
        computer_id: str,
        rpc: RpcServer,
        feed: ScreenFeed,
        context: Callable[[], Any],
        stopping: Callable[[], bool],
        failed: Callable[[], None],
        download_started: Callable[[Download], None],
    ) -> None:
        self.computer_id = computer_id
        self.rpc = rpc
        self.feed = feed
        self._context = context
        self._stopping = stopping
        self._failed = failed
        self._download_started = download_started
        self.tabs = Tabs()
        # JavaScript dialogs the pages opened and nobody answered yet (executor/dialogs.py).
        self.dialogs = Dialogs()
        # Futures of work on a page that gives up waiting when a dialog opens on it.
        self._dialog_watchers: list[tuple[Page, asyncio.Future[Pending]]] = []
        # Each page's CDP session holding its sign-in challenges, as it starts (executor/auth_prompts.py).
        self._auth_watches: dict[Page, asyncio.Task[None]] = {}
        # Each page's taint tracking as it starts (executor/taint.py).
        self._taint_installs: dict[Page, asyncio.Task[None]] = {}
        self._page: Page | None = None
        # The page the screencast's CDP session is attached to (the active one, once it has moved).
        self._cast_page: Page | None = None
        self._tabs_push: asyncio.Task[None] | None = None
        self._tabs_dirty = False

    @property
    def page(self) -> Page:
        """The active page: what the screen shows, inputs reach and agent actions act on."""
        if self._page is None:
            raise ControlError("The browser is not started.", "unavailable")
        return self._page

    async def open(self, context: Any, page: Page) -> None:
        """A new browser context and its first page: pages start afresh."""
        self.tabs = Tabs()
        self.dialogs = Dialogs()
        self._auth_watches = {}
        self._taint_installs = {}
        for extra in list(context.pages):
            if extra is not page:
                with contextlib.suppress(Exception):
                    await extra.close()
        self._adopt(page)
        # Its sign-in challenges are held before anything navigates it.
        await self._auth_watches[page]
        # Every page opened from now on (by a page, a person or the agent) is adopted and followed.
        context.on("page", self._page_opened)
        await self._follow(page)

    def clear(self, context: Any) -> None:
        """The browser closes: its pages, and the secrets typed into them, are forgotten."""
        for open_page in list(self.tabs.pages.values()):
            taint.forget_page(open_page)
        if context is not None:
            taint.forget_context(context)  # the secrets typed into it leave memory with it
        self._taint_installs.clear()
        self.tabs.clear()
        self.dialogs.clear()
        self._auth_watches.clear()
        self._page = self._cast_page = self.feed.cdp = None

    def _adopt(self, page: Page) -> str:
        """Watch a page of the context; its tab id."""
        tab_id = self.tabs.add(page)
        # Captcha solver signals are watched from the start, not only during a login.
        watch_console(page)
        page.on("download", self._download_started)
        page.on("crash", self._page_crashed)
        page.on("close", self._page_closed)
        # Listening keeps every dialog open (Playwright would dismiss it): a person or the agent answers.
        page.on("dialog", lambda dialog: self._dialog_opened(page, dialog))
        # A site's HTTP sign-in challenge waits likewise (executor/auth_prompts.py).
        self._auth_watches[page] = asyncio.get_running_loop().create_task(self._watch_auth(page))
        page.on("framenavigated", lambda frame: self._tabs_changed() if frame == page.main_frame else None)
        page.on("load", lambda _page: self._page_loaded(page))
        # Secret fields are tracked (and masked at the rendering) from the page's first document on.
        self._taint_installs[page] = asyncio.get_running_loop().create_task(self._install_taint(page))
        return tab_id

    async def _install_taint(self, page: Page) -> None:
        try:
            await taint.install(page)
        except Exception:  # noqa: BLE001 - a page closed at once; any later use installs it again
            if not page.is_closed():
                logger.warning("could not track the secret fields of a page of %s", self.computer_id)

    async def _watch_auth(self, page: Page) -> None:
        try:
            await AuthWatch(page, self._auth_required).start()
        except Exception:  # noqa: BLE001 - a page closed before its session opened has nothing to hold
            if not page.is_closed():
                logger.warning("could not hold the HTTP sign-in prompts of a page of %s", self.computer_id)

    def _page_loaded(self, page: Page) -> None:
        # Its title is read now, while it answers: a dialog may block it later.
        asyncio.get_running_loop().create_task(self._remember_title(page))
        self._tabs_changed()

    async def _remember_title(self, page: Page) -> None:
        tab_id = self.tabs.id_of(page)
        if tab_id is not None and self.dialogs.on_page(page) is None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    self.tabs.titles[tab_id] = str(await page.title())

    def _page_opened(self, page: Page) -> None:
        """A page opened a page (``window.open``, ``target=_blank``, a popup): it becomes the active one."""
        if self.tabs.full():
            logger.warning(
                "a page of %s opened more than %d pages; closing the new one", self.computer_id, len(self.tabs.pages)
            )
            asyncio.get_running_loop().create_task(page.close())
            return
        tab_id = self._adopt(page)

        async def follow() -> None:
            with contextlib.suppress(Exception):
                opener = await page.opener()
                if opener is not None:
                    self.tabs.openers[tab_id] = opener
            await self._follow_quietly(page)

        asyncio.get_running_loop().create_task(follow())

    def _page_closed(self, page: Page) -> None:
        was_active = page is self._page
        self._auth_watches.pop(page, None)
        self._taint_installs.pop(page, None)
        taint.forget_page(page)
        if self.dialogs.forget_page(page):
            self._dialogs_changed()
        following = self.tabs.remove(page)
        if self._context() is None or self._stopping():
            return
        if was_active:
            target = self.tabs.get(following) if following is not None else None
            if target is not None:  # active at once; the screencast follows
                self.tabs.activate(following)  # type: ignore[arg-type]
                self._page = target
            asyncio.get_running_loop().create_task(self._follow_quietly(target))
        else:
            self._tabs_changed()

    def _page_crashed(self, page: Page) -> None:
        if page is self._page:
            self._failed()
        else:  # a background page crashed: it closes, the computer goes on
            asyncio.get_running_loop().create_task(page.close())

    async def _follow_quietly(self, page: Page | None) -> None:
        try:
            if page is None:
                if self._context() is None:
                    return
                page = await self._context().new_page()  # the last page closed: a blank one takes its place
                return  # the context's "page" event adopts and follows it
            await self._follow(page)
        except Exception:
            logger.warning("could not follow the new active page of %s", self.computer_id, exc_info=True)

    async def _follow(self, page: Page) -> None:
        """Make ``page`` the active page: the screencast moves to it, and every viewer is told.

        The frames' ``url`` changes with it (the spec's own notice); sockets that asked for
        tab notices also get a ``tabs`` message.
        """
        tab_id = self.tabs.id_of(page)
        if tab_id is None or page.is_closed():
            return
        self.tabs.activate(tab_id)
        self._page = page
        if page is not self._cast_page:
            cdp = await self._context().new_cdp_session(page)
            if self._page is not page:  # another page became active meanwhile: it moves the screencast
                with contextlib.suppress(Exception):
                    await cdp.detach()
                return
            self.feed.on_cdp(cdp)
            self._cast_page = page
            await self.feed.moved(cdp)
            with contextlib.suppress(Exception):
                await page.bring_to_front()
        self._tabs_changed()

    def _tabs_changed(self) -> None:
        """Tell every connection (the gateway forwards it to sockets that asked) what the tabs are now."""
        if self._stopping() or not self.rpc.peers:
            return
        if self._tabs_push is None or self._tabs_push.done():
            self._tabs_push = asyncio.get_running_loop().create_task(self._push_tabs())
        else:
            self._tabs_dirty = True

    async def _push_tabs(self) -> None:
        while True:
            self._tabs_dirty = False
            tabs = taint.redact(await self._tabs_describe())
            message = ops.pushed(ops.TabsEvent(event="tabs", tabs=tabs))
            for peer in list(self.rpc.peers):
                if peer.subscriber is not None:  # the gateway's screen links; workers ask when they need it
                    await self.rpc.push(peer, message)
            if not self._tabs_dirty:
                return

    async def tab_switch(self, tab_id: str) -> None:
        page = self.tabs.get(tab_id)
        if page is None:
            raise ControlError("No open tab has that id.", "tab_not_found")
        await self._follow(page)

    async def tab_close(self, tab_id: str) -> None:
        page = self.tabs.get(tab_id)
        if page is None:
            raise ControlError("No open tab has that id.", "tab_not_found")
        # Closing without beforeunload: the person or the agent asked for it explicitly.
        await page.close()
        for _ in range(50):  # the close event settles the active page
            if self._page is not None or self._context() is None:
                break
            await asyncio.sleep(0.02)

    async def tabs_describe(self) -> list[dict[str, Any]]:
        return await self._tabs_describe()

    # --- dialogs (alert, confirm, prompt, beforeunload) ---------------------------

    def _dialog_opened(self, page: Page, dialog: Dialog) -> None:
        """A page opened a dialog: it waits, blocking its page, for a person or the agent to answer."""
        tab_id = self.tabs.id_of(page)
        if tab_id is None or self.dialogs.full() or self._stopping():
            asyncio.get_running_loop().create_task(_quietly(dialog.dismiss()))
            return
        self._dialog_waits(self.dialogs.add(dialog, page, tab_id))

    def _auth_required(self, page: Page, challenge: Challenge) -> None:
        """A site asked for an HTTP sign-in: its request waits, like a dialog, for a person or the agent."""
        tab_id = self.tabs.id_of(page)
        if tab_id is None or self.dialogs.full() or self._stopping():
            asyncio.get_running_loop().create_task(_quietly(challenge.answer(None)))
            return
        self._dialog_waits(self.dialogs.add_auth(challenge, page, tab_id))

    def _dialog_waits(self, entry: Pending) -> None:
        """A dialog (or sign-in prompt) now waits: work on its page stops waiting, viewers are told."""
        page = entry.page
        # Never the page's text or the site's realm: they may carry private values.
        logger.info("a page of %s opened a dialog (%s, %s)", self.computer_id, entry.kind, entry.id)
        for watched, future in list(self._dialog_watchers):
            if watched is page and not future.done():
                future.set_result(entry)
        self._dialogs_changed()

    def _dialogs_changed(self) -> None:
        """Tell the screen links (the gateway forwards it to sockets that asked) which dialogs wait."""
        if self._stopping() or not self.rpc.peers:
            return
        message = ops.pushed(ops.DialogsEvent(event="dialogs", dialogs=taint.redact(self.dialogs.describe())))
        for peer in list(self.rpc.peers):
            if peer.subscriber is not None:
                asyncio.get_running_loop().create_task(self.rpc.push(peer, message))

    async def unless_dialog(self, page: Page, work: Any) -> Any:
        """Await ``work`` on ``page``, but stop waiting when the page opens a dialog: a click whose
        handler calls ``confirm()`` would otherwise wait for the answer it is blocking. The effect
        (the click) has happened; the caller gets the dialog (a ``Pending``) instead of the result."""
        task = asyncio.ensure_future(work)
        opened: asyncio.Future[Pending] = asyncio.get_running_loop().create_future()
        watcher = (page, opened)
        self._dialog_watchers.append(watcher)
        try:
            await asyncio.wait({task, opened}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._dialog_watchers.remove(watcher)
        if task.done():
            opened.cancel()
            return task.result()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        return opened.result()

    async def _tabs_describe(self) -> list[dict[str, Any]]:
        return await self.tabs.describe(blocked=frozenset(p.page for p in self.dialogs.pending.values()))

    def _waiting(self, dialog_id: str | None) -> Pending:
        entry = self.dialogs.get(dialog_id) if dialog_id else self.dialogs.on_page(self.page)
        if entry is None:
            raise ControlError(
                "No dialog with that id is waiting." if dialog_id else "The active tab shows no dialog.",
                "dialog_not_found",
            )
        return entry

    async def dialog_answer(
        self, dialog_id: str | None, *, accept: bool, text: str | None, credentials: tuple[str, str] | None = None
    ) -> dict[str, Any]:
        """Answer a waiting dialog (by id, or the active page's); what was answered.

        A sign-in prompt (``auth``) is answered with ``credentials`` (a person's username and
        password, or a Vault credential ``auth_answer`` checked) or cancelled; nothing else."""
        entry = self._waiting(dialog_id)
        if entry.challenge is not None:
            if text is not None or (accept and credentials is None):
                raise ControlError(
                    f"{entry.id} is a site's sign-in prompt: it is answered with a username and password (the "
                    "agent: auth_answer with a stored credential) or cancelled (accept false).",
                    "bad_request",
                )
        elif credentials is not None:
            raise ControlError("Only a sign-in prompt takes a username and password.", "bad_request")
        if text is not None and entry.kind != "prompt":
            raise ControlError("Only a prompt dialog takes text.", "bad_request")
        self.dialogs.forget(entry.id)
        self._dialogs_changed()
        with contextlib.suppress(Exception):  # already gone with its page
            await entry.answer(accept=accept, text=text, credentials=credentials)
        logger.info("dialog %s of %s %s", entry.id, self.computer_id, "accepted" if accept else "dismissed")
        return {"dialog": entry.id, "tab": entry.tab, "kind": entry.kind, "accepted": accept}

    def auth_prompt(self, dialog_id: str | None) -> dict[str, Any]:
        """The waiting sign-in prompt (by id, or the active page's): id, tab, kind, origin, realm."""
        entry = self._waiting(dialog_id)
        if entry.challenge is None:
            raise ControlError(
                f"{entry.id} is a JavaScript {entry.kind} dialog, not a site's sign-in prompt: answer it with "
                "dialog_answer.",
                "bad_request",
            )
        return entry.describe()

    async def auth_answer(self, dialog_id: str, credentials: tuple[str, str] | None) -> dict[str, Any]:
        """Sign in to a prompt with ``credentials`` (or cancel it: None) and wait, a few seconds at
        most, for what the site did: its page loaded (``signed_in``; ``cancelled``: its refusal),
        it asked again (``asked_again``: it refused the credentials), or nothing yet (``sent``)."""
        entry = self._waiting(dialog_id)
        page, challenge = entry.page, entry.challenge
        if challenge is None:
            raise ControlError(f"{entry.id} is not a sign-in prompt.", "bad_request")
        answered = {"dialog": entry.id, "tab": entry.tab, "kind": AUTH, "accepted": credentials is not None}

        async def answer_and_settle() -> str:
            committed = asyncio.Event()

            def on_navigated(frame: Any) -> None:
                if frame == page.main_frame:
                    committed.set()

            page.on("framenavigated", on_navigated)
            try:
                await self.dialog_answer(entry.id, accept=credentials is not None, text=None, credentials=credentials)
                # The page's document commits once the site's answer comes through; another request
                # can only be refused (asked again) or not: there is nothing else to see of it.
                wait = AUTH_SETTLE_SECONDS if challenge.navigation else AUTH_RECHALLENGE_SECONDS
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(committed.wait(), timeout=wait)
                if credentials is None:
                    return "cancelled"
                return "signed_in" if challenge.navigation and committed.is_set() else "sent"
            finally:
                page.remove_listener("framenavigated", on_navigated)

        done = await self.unless_dialog(page, answer_and_settle())
        if isinstance(done, Pending):
            # The answer went and the page waits again: the site refused it (or its new page opened a dialog).
            again = done.challenge is not None and done.challenge.origin == challenge.origin
            return {**answered, "outcome": "asked_again" if again else "dialog", "url": page.url}
        return {**answered, "outcome": done, "url": page.url}

    def dialogs_describe(self) -> list[dict[str, Any]]:
        return self.dialogs.describe()

    def refuse_if_blocked(self, page: Page, *, beside_dialog: bool) -> None:
        """An action other than answering (or a tab action) never reaches a page a dialog blocks."""
        blocking = self.dialogs.on_page(page)
        if blocking is not None and blocking.challenge is not None and not beside_dialog:
            raise ControlError(
                f"The active tab waits on a site's sign-in prompt ({blocking.id}); answer it with auth_answer "
                "(or cancel it) first.",
                "dialog_open",
            )
        if blocking is not None and not beside_dialog:
            raise ControlError(
                f"The active tab shows a {blocking.kind} dialog ({blocking.id}) that blocks the page; "
                "answer it with dialog_answer first.",
                "dialog_open",
            )


async def _quietly(work: Any) -> None:
    with contextlib.suppress(Exception):
        await work
