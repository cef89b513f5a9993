"""The executor process: one Chromium for one computer, served privately.

It launches Chromium through Playwright at 1280x720, registers a fresh ``generation`` and its
private address on the Computer row, heartbeats, and serves a token-protected WebSocket
interface on a loopback/private address to the gateway (frames, takeover, inputs) and to the
workers (agent lease and actions). ``Executor`` composes its parts:

- ``browser`` (``executor/browser.py``): the backend, the browser, its context and profile;
- ``pages`` (``executor/pages.py``): the tabs, the active page, dialogs and sign-in prompts;
- ``feed`` (``executor/feed.py``): the screencast, its subscribers and their pacing;
- ``downloads`` (``executor/downloads.py``): downloads stored as artifacts and reported;
- ``heartbeat`` (``executor/heartbeat.py``): the heartbeat thread;
- ``rpc`` (``executor/rpc.py``): the private interface, dispatching to ``executor/handlers.py``;
- ``control`` (``executor/control.py``): who may act (the agent's lease, a person's grant).

At a clean stop the profile goes to the store any executor host restores from
(``executor/profile_store.py``). A change of generation (``renew``) wipes everything of the old profile before the new
generation registers. The wire format is in ``executor/wire.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from typing import Any

from playwright.async_api import Page, async_playwright

from executor import actions, egress, ops, taint
from executor.backends import BrowserBackend
from executor.backends.local import CHROMIUM_ARGS as CHROMIUM_ARGS
from executor.browser import ComputerBrowser
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH
from executor.control import Control
from executor.downloads import Downloads
from executor.feed import ScreenFeed
from executor.handlers import OP_HANDLERS
from executor.heartbeat import Heartbeat
from executor.pages import Pages
from executor.profile import Profile
from executor.recording import Recorder
from executor.rpc import Peer, RpcServer
from executor.server_link import HEARTBEAT_ENDED, HEARTBEAT_SECONDS, ServerLink, in_process

__all__ = ["CHROMIUM_ARGS", "HEARTBEAT_SECONDS", "Executor", "ExecutorThread"]

logger = logging.getLogger(__name__)


class Executor:
    def __init__(
        self,
        *,
        computer_id: str,
        host: str = "127.0.0.1",
        port: int = 0,
        register: bool = True,
        sandbox: bool = True,
        backend: BrowserBackend | None = None,
        profile: Profile | None = None,
        server: ServerLink | None = None,
    ) -> None:
        self.computer_id = computer_id
        # The executor's only way to the server's state (run_executor: the internal HTTP endpoint).
        self.server: ServerLink = server if server is not None else in_process(computer_id)
        self.host = host
        self.port = port
        self.register = register
        self.generation = uuid.uuid4()
        self.address = ""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()
        self.stop_event = asyncio.Event()
        self.downloads = Downloads(computer_id=computer_id, server=self.server)
        self.control = Control(on_change=self._control_changed, cancel_downloads=self.downloads.cancel)
        self.input_lock = asyncio.Lock()
        # What a person holds down; released when their control ends (see _settle_held).
        self.held = actions.Held()
        self.inputs_dispatched = 0  # person inputs handed to the browser (op_input past its grant check)
        self.rpc = RpcServer(dispatch=self._dispatch, lost=self._browser_lost, closed=self._closed)
        self.feed = ScreenFeed(
            url=lambda: self.page.url,
            control=lambda: self.control.frame_control(),
            framing=lambda: self.browser.settings.viewport_size != (VIEWPORT_WIDTH, VIEWPORT_HEIGHT),
            field_look=lambda: taint.field_look(self.page),
        )
        self.recorder = Recorder(
            feed=self.feed,
            server=self.server,
            control=lambda: self.control.frame_control(),
            inputs=lambda: self.inputs_dispatched,
        )
        self.browser = ComputerBrowser(
            computer_id=computer_id,
            server=self.server,
            register=register,
            sandbox=sandbox,
            backend=backend,
            profile=profile,
            on_failed=self._browser_failed,
            make_pages=lambda browser: Pages(
                computer_id=computer_id,
                rpc=self.rpc,
                feed=self.feed,
                context=lambda: browser.context,
                stopping=lambda: browser.stopping,
                failed=browser.fail,
                download_started=self.downloads.started,
            ),
        )
        self.pages = self.browser.pages
        self.heartbeat = Heartbeat(
            computer_id=computer_id,
            server=self.server,
            generation=lambda: self.generation,
            answered=self._heartbeat_answered,
            refused=self._stop_now,
        )

    # What tests and the process read of its parts.

    @property
    def page(self) -> Page:
        """The active page: what the screen shows, inputs reach and agent actions act on."""
        return self.pages.page

    @property
    def context(self) -> Any:
        return self.browser.context

    @property
    def backend(self) -> BrowserBackend | None:
        return self.browser.backend

    @property
    def egress(self) -> egress.EgressProxy:
        return self.browser.egress

    @property
    def failed(self) -> bool:
        """Whether the browser failed (the process then ends; a restart is a new generation)."""
        return self.browser.failed

    @property
    def token(self) -> str:
        return self.rpc.token

    # --- lifecycle ---------------------------------------------------------

    async def serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        # A bad RAM_BROWSER_EGRESS_ALLOW stops the executor here, before any browser starts.
        egress.configured_policy()
        # Known before the interface listens, so before anyone can learn its address.
        self.rpc.token = await self.server.private_token(generation=self.generation)
        browser = self.browser
        clean = False  # a stop asked for (not a browser failure, not an error) stores the profile
        await browser.prepare()
        async with async_playwright() as playwright:
            browser.playwright = playwright
            try:
                await browser.start(browser.proxy_address)
                async with self.rpc.serve(self.host, self.port) as server:
                    self.address = self.rpc.address_of(server)
                    if self.register:
                        await self._register()
                    watch = asyncio.create_task(self._watch_browser())
                    if self.register:
                        self.heartbeat.start(self.loop)
                    journal = asyncio.create_task(browser.keep_journal())
                    self.ready.set()
                    logger.info("executor for %s ready, generation %s", self.computer_id, self.generation)
                    await self.stop_event.wait()
                    clean = not browser.failed
                    browser.stopping = True
                    self.heartbeat.stop()
                    watch.cancel()
                    journal.cancel()
                    await self.rpc.close_all()
            finally:
                browser.stopping = True
                self.heartbeat.stop()
                await self.recorder.close()  # what was recorded is sent before the browser goes
                if self.register:
                    try:
                        await self.server.stopped(generation=self.generation, failed=browser.failed)
                    except Exception:
                        logger.warning("could not report the stop of %s to the server", self.computer_id)
                        clean = False  # nor would it take the profile: not waited for twice
                with contextlib.suppress(Exception):
                    await browser.save_journal()
                await browser.close()
                if clean:
                    # Closed, Chromium wrote its cookies: the profile any host can start from next.
                    await browser.store_profile(self.generation)
                await browser.egress.close()

    def stop(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop_event.set)

    async def _register(self) -> None:
        if not await self.server.register(generation=self.generation, address=self.address):
            logger.warning("computer %s does not exist; serving unregistered", self.computer_id)

    async def _renew(self) -> None:
        """The generation was ended (the computer moved to another account, its profile was
        reset, or its browser backend was changed): everything of the old profile goes —
        connections, control, downloads, the whole browser profile on disk — and a new
        generation registers only once the new profile is in place."""
        logger.warning("generation of %s ended; wiping the browser profile", self.computer_id)
        self.control.fail()
        await self.recorder.stop()  # the old generation's run ends with it
        await self.rpc.close_all(quietly=True)
        if self.feed.screencasting:
            await self.feed.stop()
        await self.downloads.end()  # the old generation's: never reported to the next one's runs
        async with self.input_lock:
            await self.browser.renew()
        self.control = Control(on_change=self._control_changed, cancel_downloads=self.downloads.cancel)
        self.generation = uuid.uuid4()
        # The old generation's token dies with it; the new one is known before the new generation registers.
        self.rpc.token = await self.server.private_token(generation=self.generation)
        await self._register()

    async def _stop_now(self) -> None:
        self.stop_event.set()

    async def _heartbeat_answered(self, current: str, generation: uuid.UUID) -> None:
        if generation != self.generation:
            return  # renewed meanwhile
        if current == HEARTBEAT_ENDED:
            try:
                await self._renew()
            except Exception:
                logger.exception("could not renew the browser profile; stopping")
                self.stop_event.set()
        else:
            logger.warning("another executor generation registered for %s; stopping", self.computer_id)
            self.stop_event.set()

    async def _watch_browser(self) -> None:
        """Every heartbeat period, on the executor's loop: expire the human grant, check the browser."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self.control.expire()
            if not await self.browser.alive():
                self.browser.fail("no answer")
                return

    async def _browser_lost(self) -> bool:
        return await self.browser.lost()

    def _browser_failed(self) -> None:
        self.control.fail()
        # The process ends; a restart is a new generation.
        asyncio.get_running_loop().call_later(0.5, self.stop_event.set)

    # --- the private interface ----------------------------------------------

    async def _dispatch(self, op: str, peer: Peer, args: Any) -> dict[str, Any]:
        return await OP_HANDLERS[op](self, peer, args)

    async def _closed(self, peer: Peer) -> None:
        await self.feed.unsubscribe(peer)

    # --- control -------------------------------------------------------------

    def _control_changed(self) -> None:
        recorder = getattr(self, "recorder", None)  # absent only while the executor is being built
        if recorder is not None:
            recorder.control_changed()  # a person's period starts or ends exactly here
        if self.control.state != "human" and self.held:
            asyncio.get_running_loop().create_task(self._settle_held())
        self.rpc.push_all(
            ops.pushed(
                ops.ControlEvent.model_validate(
                    {"event": "control", "control": self.control.state, "version": self.control.version}
                )
            )
        )
        # A frame's ``control`` must not lag behind a change: re-offer the latest.
        self.feed.refresh()

    async def _settle_held(self) -> None:
        """Release what an ended grant left pressed, before the next holder's first action.

        Every input and agent action waits for ``input_lock``, and each also settles
        first, so nobody acts on a computer with a key or button still held.
        """
        async with self.input_lock:
            await self.settle_held_locked()

    async def settle_held_locked(self) -> None:
        grant = self.control.grant
        if self.held and (self.control.state != "human" or grant is None or grant.id != self.held.grant_id):
            await actions.release_held(self.page, self.held)


class ExecutorThread:
    """An executor in a background thread with its own event loop (tests, benchmark)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"executor-{executor.computer_id}")

    def _run(self) -> None:
        try:
            asyncio.run(self.executor.serve())
        except BaseException as exc:  # reported by start()
            self.error = exc
            self.executor.ready.set()

    def start(self, timeout: float = 60) -> ExecutorThread:
        self.thread.start()
        if not self.executor.ready.wait(timeout) or self.error is not None:
            raise RuntimeError(f"executor did not start: {self.error!r}")
        return self

    def stop(self) -> None:
        self.executor.stop()
        self.thread.join(timeout=30)
