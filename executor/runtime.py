"""The executor process: one Chromium for one computer, served privately.

It launches Chromium through Playwright at 1280x720, registers a fresh
``generation`` and its private address on the Computer row, heartbeats, and
serves a token-protected WebSocket interface on a loopback/private address to
the gateway (frames, takeover, inputs) and to the workers (agent lease and
actions). Frames come from one CDP screencast that runs only while someone
watches; every captured frame is offered to every subscriber, each throttled
to its own ``max_fps`` with the latest frame winning.
The wire format is in ``executor/wire.py``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hmac
import io
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
from asgiref.sync import sync_to_async
from django.conf import settings
from PIL import Image
from playwright.async_api import Dialog, Download, Page, async_playwright
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from core.contracts import Closed
from core.metrics import EXECUTOR_INPUTS
from executor import actions, egress, login, ops, taint
from executor.auth_prompts import AuthWatch, Challenge
from executor.backends import BackendUnavailable, BrowserBackend, EgressUnenforceable, LocalBackend, backend_for, scrub
from executor.backends.local import CHROMIUM_ARGS as CHROMIUM_ARGS
from executor.contracts import (
    VIEWPORT_HEIGHT,
    VIEWPORT_WIDTH,
    ComputerSettings,
    DialogInput,
    KeyInput,
    TabInput,
    TextInput,
    computer_settings,
)
from executor.control import HUMAN_GRANT_SECONDS, Control, ControlError
from executor.dialogs import AUTH, Dialogs, Pending
from executor.filenames import clean_filename
from executor.link import (
    HEARTBEAT_CURRENT,
    HEARTBEAT_ENDED,
    HEARTBEAT_SECONDS,
    LinkError,
    ServerLink,
    file_digest,
    in_process,
)
from executor.profile import Profile
from executor.screencast import FrameWindow, ScreencastPacer
from executor.tabs import Tabs
from executor.wire import CALL_TIMEOUT_SECONDS, MAX_FRAME_BYTES, pack_frame
from vault_bridge.credentials import (
    VaultRefused,
    VaultUnavailable,
    browser_vendor_secret_read,
    computer_proxy_credentials_read,
)

logger = logging.getLogger(__name__)

# An operation's handler as the dispatcher and in-process callers call it.
type Handler[A] = Callable[[Executor, Peer, A | dict[str, Any]], Awaitable[dict[str, Any]]]

JPEG_QUALITY = 65
SCREENCAST = {
    "format": "jpeg",
    "quality": JPEG_QUALITY,
    "maxWidth": VIEWPORT_WIDTH,
    "maxHeight": VIEWPORT_HEIGHT,
    "everyNthFrame": 1,
}
# How long an operation's error waits for the browser process to answer before calling it lost.
LOST_CHECK_SECONDS = 2.0
BROWSER_LOST = (
    "The computer's browser was lost (its remote session ended or its connection closed); "
    "the computer is unavailable until its executor starts again."
)
# How often the cookie journal is compared with the browser's cookies (and rewritten when they changed).
JOURNAL_SECONDS = 1.0
MAX_REQUEST_BYTES = 1 << 20
# The most finished downloads kept for the next agent action's reply (older ones are dropped).
MAX_REPORTED_DOWNLOADS = 50
# The actions that may start a download: their reply looks for one (Playwright's click, press and
# goto return once a navigation they started has committed or turned into a download).
DOWNLOADING = frozenset({"click", "press", "navigate"})
# After a sign-in answer: how long the agent's answer waits for the site's page to load (or to
# ask again), and, for a request other than the page's own document, for it to ask again.
AUTH_SETTLE_SECONDS = 7.0
AUTH_RECHALLENGE_SECONDS = 1.5


def _takes[A: Closed](
    model: type[A],
) -> Callable[[Callable[[Executor, Peer, A], Awaitable[dict[str, Any]]]], Handler[A]]:
    """An operation's handler, given its arguments as their model (executor/ops.py): the RPC server
    passes them validated; a caller in the process (a test) may pass a dict, validated the same way."""

    def wrap(handler: Callable[[Executor, Peer, A], Awaitable[dict[str, Any]]]) -> Handler[A]:
        @functools.wraps(handler)
        async def parsed(self: Executor, peer: Peer, args: A | dict[str, Any]) -> dict[str, Any]:
            return await handler(self, peer, args if isinstance(args, model) else model.model_validate(args))

        parsed.args_model = model  # type: ignore[attr-defined]
        return parsed

    return wrap


@dataclass
class Frame:
    number: int
    jpeg: bytes
    url: str
    captured_at: float


@dataclass(eq=False)
class Subscriber:
    connection: Peer
    max_fps: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    next_slot: float = 0.0  # monotonic time its next frame may be sent (the screencast is paced to it)
    sent_number: int = 0  # the number of the latest frame it was sent


class Peer:
    """One client connection (a gateway socket or a worker call)."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.lock = asyncio.Lock()
        self.subscriber: Subscriber | None = None

    async def send(self, message: str | bytes) -> None:
        async with self.lock:
            await self.ws.send(message)


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
        # The computer's persistent browser profile on disk; None: an in-memory one per generation.
        self.profile = profile
        self.profile_generation: uuid.UUID | None = None
        self.journal_cookies: list[dict[str, Any]] = []
        self.proxy_address = ""
        self.playwright: Any = None
        self.tabs = Tabs()
        # JavaScript dialogs the pages opened and nobody answered yet (executor/dialogs.py).
        self.dialogs = Dialogs()
        # Futures of work on a page that gives up waiting when a dialog opens on it.
        self._dialog_watchers: list[tuple[Page, asyncio.Future[Pending]]] = []
        # Each page's CDP session holding its sign-in challenges, as it starts (executor/auth_prompts.py).
        self._auth_watches: dict[Page, asyncio.Task[None]] = {}
        # Each page's taint tracking as it starts (executor/taint.py).
        self._taint_installs: dict[Page, asyncio.Task[None]] = {}
        self.sandbox = sandbox
        # None: the computer's own backend, read from its row (and its secret from Vault) at start.
        self.backend: BrowserBackend | None = backend
        self.from_row = backend is None and register
        self.browser_cdp: Any = None
        self.missed_heartbeats = 0
        self.host = host
        self.port = port
        self.register = register
        self.generation = uuid.uuid4()
        self.address = ""
        # The private interface's token, asked of the server at start (until then, one nobody knows).
        self.token = secrets.token_urlsafe(32)
        self.control = Control(on_change=self._control_changed, cancel_downloads=self._cancel_downloads)
        self.peers: set[Peer] = set()
        self.subscribers: set[Subscriber] = set()
        self.latest: Frame | None = None
        self.latest_data = ""  # the latest frame as Chromium sent it (base64), to spot a refresh that changed nothing
        self.frame_count = 0
        self.raw_frames = 0
        self.inputs_dispatched = 0  # person inputs handed to the browser (op_input past its grant check)
        self.screencasting = False
        self.pacer = ScreencastPacer(
            ack=self._ack, capture=self._capture_now, next_slot=self._next_slot, min_interval=self._min_interval
        )
        self.downloads: set[Download] = set()
        self.download_tasks: set[asyncio.Task[None]] = set()
        # Downloads finished (stored, refused, failed) and not yet reported with an agent action.
        self.finished_downloads: list[dict[str, Any]] = []
        self.input_lock = asyncio.Lock()
        # What a person holds down; released when their control ends (see _settle_held).
        self.held = actions.Held()
        self._page: Page | None = None
        # The page the screencast's CDP session is attached to (the active one, once it has moved).
        self._cast_page: Page | None = None
        self.browser: Any = None
        self.context: Any = None
        self.cdp: Any = None
        self._tabs_push: asyncio.Task[None] | None = None
        self._tabs_dirty = False
        self.stop_event = asyncio.Event()
        # Ends the heartbeat thread (set when the executor stops).
        self.beats_stop = threading.Event()
        self.failed = False
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()
        self.egress = egress.EgressProxy()
        # The computer's browser settings, read from its row each time its browser starts
        # (an executor that does not register keeps the defaults).
        self.settings = ComputerSettings()

    # --- lifecycle ---------------------------------------------------------

    async def serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        # A bad RAM_BROWSER_EGRESS_ALLOW stops the executor here, before any browser starts.
        egress.configured_policy()
        # Known before the interface listens, so before anyone can learn its address.
        self.token = await self.server.private_token(generation=self.generation)
        if self.backend is None:
            # An executor that does not register (tests, benchmarks) is not tied to a row: local.
            self.backend = await self._load_backend() if self.register else LocalBackend(sandbox=self.sandbox)
        backend = self.backend
        self._check_egress(backend)
        self.proxy_address = await self._proxy_for(backend)
        async with async_playwright() as playwright:
            self.playwright = playwright
            try:
                await self._start_browser(self.proxy_address)
                async with serve(
                    self._handle,
                    self.host,
                    self.port,
                    process_request=self._authorise,
                    max_size=MAX_REQUEST_BYTES,
                    ping_interval=10,
                    ping_timeout=20,
                    compression=None,
                ) as server:
                    self.address = self._address_of(server)
                    if self.register:
                        await self._register()
                    watch = asyncio.create_task(self._watch_browser())
                    if self.register:
                        threading.Thread(
                            target=self._heartbeats, name=f"heartbeat-{self.computer_id}", daemon=True
                        ).start()
                    journal = asyncio.create_task(self._keep_journal())
                    self.ready.set()
                    logger.info("executor for %s ready, generation %s", self.computer_id, self.generation)
                    await self.stop_event.wait()
                    self.stopping = True
                    self.beats_stop.set()
                    watch.cancel()
                    journal.cancel()
                    for peer in list(self.peers):
                        await peer.ws.close()
            finally:
                self.stopping = True
                self.beats_stop.set()
                if self.register:
                    try:
                        await self.server.stopped(generation=self.generation, failed=self.failed)
                    except Exception:
                        logger.warning("could not report the stop of %s to the server", self.computer_id)
                with contextlib.suppress(Exception):
                    await self._save_journal()
                await self._close_browser()
                await self.egress.close()

    @staticmethod
    def _check_egress(backend: BrowserBackend) -> None:
        if not backend.owns_network and not settings.RAM_BROWSER_EGRESS_REMOTE_ACCEPT:
            raise EgressUnenforceable(
                f"The {backend.name} backend's browser is not on RAM's network, so the egress policy cannot be "
                "fully enforced there (it covers " + egress.REMOTE_COVERS + "; not " + egress.REMOTE_MISSES + "). "
                "Set RAM_BROWSER_EGRESS_REMOTE_ACCEPT=true to run it with that partial policy."
            )

    async def _proxy_for(self, backend: BrowserBackend) -> str:
        """The egress proxy's address for a browser RAM launches (started once)."""
        if not backend.owns_network:
            return ""
        return self.egress.address or await self.egress.start()

    async def _load_backend(self) -> BrowserBackend:
        """The computer's backend, its Vault secret, and the release of a session a crash left behind."""
        config = await self.server.browser_config()
        if config is None or config.backend == "local":
            return LocalBackend(sandbox=self.sandbox)
        secret = None
        try:
            secret = await sync_to_async(browser_vendor_secret_read, thread_sensitive=False)(
                account_id=config.account_id, vendor=config.backend, grant=config.vendor_grant
            )
        except (VaultRefused, VaultUnavailable) as exc:
            raise BackendUnavailable(f"The {config.backend} secret could not be read from Vault: {exc}") from None
        try:
            backend = backend_for(backend=config.backend, options=config.options, secret=secret)
        except ValueError as exc:  # a pydantic ValidationError is a ValueError
            raise BackendUnavailable(
                f"The computer's {config.backend} options are invalid ({type(exc).__name__})."
            ) from None
        if config.leftover_session_id:
            await backend.release_leftover(config.leftover_session_id)
            await self.server.session_released(session_id=config.leftover_session_id)
        return backend

    def _persistent(self) -> Profile | None:
        """The profile on disk the browser runs on: the ``local`` backend of an executor given a
        profile. None for a remote backend, whose profile is its vendor session (or its context)."""
        return self.profile if isinstance(self.backend, LocalBackend) else None

    async def _start_browser(self, proxy_address: str) -> None:
        """Obtain the backend's browser (a vendor session is recorded before anything else can fail)."""
        backend = self._backend
        self.proxy_address = proxy_address
        if self._persistent():
            # The persistent context is the browser: it is launched by _open_context on the profile.
            self.browser = self.browser_cdp = None
            await self._open_context()
            if self.register:
                await self.server.session_record(session_id="", ready_ms=backend.ready_ms)
            return
        try:
            browser = await backend.start(self.playwright, proxy_address=proxy_address)
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(
                scrub(f"The {backend.name} browser did not start: {exc}", backend.secrets())
            ) from None
        finally:
            if self.register and backend.session_id:
                await self.server.session_record(session_id=backend.session_id, ready_ms=backend.ready_ms)
        self.browser = browser
        self.browser_cdp = await browser.new_browser_cdp_session()
        if self.register and not backend.session_id:
            await self.server.session_record(session_id="", ready_ms=backend.ready_ms)
        await self._open_context()
        # Only the browser in use: one closed on purpose (a renewal, a stop) is no failure.
        browser.on("disconnected", lambda gone: self._browser_failed("disconnected") if gone is self.browser else None)

    async def _close_browser(self) -> None:
        """Close the context and the browser (a persistent context ends its browser, which writes
        its profile) and give back a vendor session."""
        backend, browser, context = self.backend, self.browser, self.context
        self.browser = self.browser_cdp = self.context = None  # their closing is not a failure
        for open_page in list(self.tabs.pages.values()):
            taint.forget_page(open_page)
        if context is not None:
            taint.forget_context(context)  # the secrets typed into it leave memory with it
        self._taint_installs.clear()
        self.tabs.clear()
        self.dialogs.clear()
        self._auth_watches.clear()
        self._page = self._cast_page = self.cdp = None
        if browser is None and context is not None:
            with contextlib.suppress(Exception):
                await context.close()
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if backend is not None:
            session_id = backend.session_id
            await backend.release()
            if self.register and session_id:
                await self.server.session_released(session_id=session_id)

    async def _open_context(self) -> None:
        """The computer's browser context and its first page.

        On the ``local`` backend with a profile (``run_executor``), the computer's persistent
        profile of its current profile generation, its cookie journal put back; otherwise a
        fresh context of the backend's browser (in memory for ``local``: cookies, storage, cache,
        downloads end with it; a vendor session keeps its own).
        """
        backend = self._backend
        await self._load_settings(backend)
        profile = self._persistent()
        if profile is not None and isinstance(backend, LocalBackend):
            generation = await self.server.profile_generation()
            if generation is None:
                raise RuntimeError(f"No computer {self.computer_id!r}.")
            user_data = await asyncio.to_thread(profile.prepare, generation)
            try:
                context = await backend.start_persistent(
                    self.playwright,
                    user_data,
                    proxy_address=self.proxy_address,
                    settings=self.settings,
                    downloads=profile.downloads_dir(generation),
                )
            except Exception as exc:
                raise BackendUnavailable(f"The local browser did not start: {_browser_error(exc)}") from None
            context.on("close", lambda _context: self._browser_failed("closed") if context is self.context else None)
            cookies = await asyncio.to_thread(profile.journal_load, generation)
            if cookies:
                with contextlib.suppress(Exception):
                    await context.add_cookies(cookies)  # type: ignore[arg-type]
            self.profile_generation = generation
            self.journal_cookies = cookies
        else:
            context = await backend.new_context(self.browser, self.settings)
        egress.attach(context, self.egress)
        if not backend.owns_network:
            await egress.guard_context(context, self.egress)
        self.context = context
        self.tabs = Tabs()
        self.dialogs = Dialogs()
        self._auth_watches = {}
        self._taint_installs = {}
        page = await backend.first_page(context, self.settings)
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

    async def _load_settings(self, backend: BrowserBackend) -> None:
        """The computer's settings as its browser starts, and its upstream proxy on the egress proxy
        (credentials read from Vault now: a browser never starts without the proxy it was given)."""
        if not self.register:
            return
        try:
            launch = await self.server.launch_settings(proxy_grant=backend.owns_network)
        except LinkError as exc:
            raise BackendUnavailable(f"The computer's browser settings could not be read: {exc}") from None
        try:
            if launch is not None and not launch.valid:
                raise ValueError("invalid")
            self.settings = computer_settings(launch.settings) if launch is not None else ComputerSettings()
        except ValueError:
            raise BackendUnavailable("The computer's browser settings are invalid; set them again.") from None
        proxy = self.settings.proxy
        if launch is None or proxy is None or not backend.owns_network:
            self.egress.upstream = None
            return
        username = password = ""
        if proxy.credentials:
            if not launch.proxy_grant:
                raise BackendUnavailable("The proxy's credentials could not be read from Vault (no grant).")
            try:
                stored = await sync_to_async(computer_proxy_credentials_read, thread_sensitive=False)(
                    account_id=launch.account_id, computer_id=self.computer_id, grant=launch.proxy_grant
                )
            except (VaultRefused, VaultUnavailable) as exc:
                raise BackendUnavailable(f"The proxy's credentials could not be read from Vault: {exc}") from None
            if stored is None:
                raise BackendUnavailable("The proxy's credentials are not in Vault; set them again.")
            username, password = stored
        self.egress.upstream = egress.Upstream.from_server(proxy.server, username=username, password=password)

    async def _renew(self) -> None:
        """The generation was ended (the computer moved to another account, its profile was
        reset, or its browser backend was changed): everything of the old profile goes —
        connections, control, downloads, the whole browser profile on disk — and a new
        generation registers only once the new profile is in place."""
        logger.warning("generation of %s ended; wiping the browser profile", self.computer_id)
        self.control.fail()
        for peer in list(self.peers):
            with contextlib.suppress(Exception):
                await peer.ws.close()
        if self.screencasting:
            await self._stop_screencast()
        await self._cancel_downloads()
        if self.download_tasks:
            await asyncio.wait(set(self.download_tasks), timeout=5)
        self.finished_downloads = []  # the old generation's: never reported to the next one's runs
        async with self.input_lock:
            old_generation = self.profile_generation
            if self.from_row:
                # The computer's backend is read again from its row — it may be another backend, other
                # options, or another owner's secret —: the old browser is closed (a vendor session
                # released, a profile on disk wiped) before the new one is obtained.
                profile = self._persistent()
                self.stopping = True
                await self._close_browser()
                self.stopping = False
                if profile is not None and old_generation is not None:
                    await asyncio.to_thread(profile.wipe, old_generation)
                self.backend = await self._load_backend()
                self._check_egress(self.backend)
                proxy = await self._proxy_for(self.backend)
                self.missed_heartbeats = 0
                await self._start_browser(proxy)
            elif self.backend is not None and self.backend.session_per_profile:
                # A vendor session is one profile: the old one is released, a new one created.
                self.stopping = True
                await self._close_browser()
                self.stopping = False
                await self._start_browser("")
            elif (profile := self._persistent()) is not None:
                old, self.context = self.context, None  # its closing is not a failure
                with contextlib.suppress(Exception):
                    await old.close()  # ends the browser, which lets go of its profile
                if old_generation is not None:
                    await asyncio.to_thread(profile.wipe, old_generation)
                await self._open_context()
            else:
                old = self.context
                await self._open_context()
                with contextlib.suppress(Exception):
                    await old.close()  # its cookies, storage, cache and downloads are deleted with it
        self.control = Control(on_change=self._control_changed, cancel_downloads=self._cancel_downloads)
        self.generation = uuid.uuid4()
        # The old generation's token dies with it; the new one is known before the new generation registers.
        self.token = await self.server.private_token(generation=self.generation)
        await self._register()

    @property
    def _backend(self) -> BrowserBackend:
        if self.backend is None:
            raise ControlError("The browser is not started.", "unavailable")
        return self.backend

    @property
    def page(self) -> Page:
        """The active page: what the screen shows, inputs reach and agent actions act on."""
        if self._page is None:
            raise ControlError("The browser is not started.", "unavailable")
        return self._page

    # --- pages (tabs) ---------------------------------------------------------

    def _adopt(self, page: Page) -> str:
        """Watch a page of the context; its tab id."""
        tab_id = self.tabs.add(page)
        # Captcha solver signals are watched from the start, not only during a login.
        login.watch_console(page)
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
        if self.context is None or self.stopping:
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
            self._browser_failed()
        else:  # a background page crashed: it closes, the computer goes on
            asyncio.get_running_loop().create_task(page.close())

    async def _follow_quietly(self, page: Page | None) -> None:
        try:
            if page is None:
                if self.context is None:
                    return
                page = await self.context.new_page()  # the last page closed: a blank one takes its place
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
        previous = self.cdp
        if page is not self._cast_page:
            cdp = await self.context.new_cdp_session(page)
            if self._page is not page:  # another page became active meanwhile: it moves the screencast
                with contextlib.suppress(Exception):
                    await cdp.detach()
                return
            cdp.on("Page.screencastFrame", lambda params: self._screencast_frame(params) if cdp is self.cdp else None)
            if previous is not None and self.screencasting:
                # The acknowledgements the pacer holds belong to the old page's screencast.
                with contextlib.suppress(Exception):
                    await self.pacer.release_all()
            self._cast_page, self.cdp = page, cdp
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous.send("Page.stopScreencast")
                with contextlib.suppress(Exception):
                    await previous.detach()
            if self.screencasting:
                await self._start_screencast()
            with contextlib.suppress(Exception):
                await page.bring_to_front()
        self._tabs_changed()

    def _tabs_changed(self) -> None:
        """Tell every connection (the gateway forwards it to sockets that asked) what the tabs are now."""
        if self.loop is None or self.stopping or not self.peers:
            return
        if self._tabs_push is None or self._tabs_push.done():
            self._tabs_push = asyncio.get_running_loop().create_task(self._push_tabs())
        else:
            self._tabs_dirty = True

    async def _push_tabs(self) -> None:
        while True:
            self._tabs_dirty = False
            tabs = taint.redact(await self._tabs_describe())
            message = json.dumps({"event": "tabs", "tabs": tabs}, separators=(",", ":"))
            for peer in list(self.peers):
                if peer.subscriber is not None:  # the gateway's screen links; workers ask when they need it
                    await self._push(peer, message)
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
            if self._page is not None or self.context is None:
                break
            await asyncio.sleep(0.02)

    async def tabs_describe(self) -> list[dict[str, Any]]:
        return await self._tabs_describe()

    # --- dialogs (alert, confirm, prompt, beforeunload) ---------------------------

    def _dialog_opened(self, page: Page, dialog: Dialog) -> None:
        """A page opened a dialog: it waits, blocking its page, for a person or the agent to answer."""
        tab_id = self.tabs.id_of(page)
        if tab_id is None or self.dialogs.full() or self.stopping:
            asyncio.get_running_loop().create_task(_quietly(dialog.dismiss()))
            return
        self._dialog_waits(self.dialogs.add(dialog, page, tab_id))

    def _auth_required(self, page: Page, challenge: Challenge) -> None:
        """A site asked for an HTTP sign-in: its request waits, like a dialog, for a person or the agent."""
        tab_id = self.tabs.id_of(page)
        if tab_id is None or self.dialogs.full() or self.stopping:
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
        if self.loop is None or self.stopping or not self.peers:
            return
        message = json.dumps(
            {"event": "dialogs", "dialogs": taint.redact(self.dialogs.describe())}, separators=(",", ":")
        )
        for peer in list(self.peers):
            if peer.subscriber is not None:
                asyncio.get_running_loop().create_task(self._push(peer, message))

    async def _unless_dialog(self, page: Page, work: Any) -> Any:
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

        done = await self._unless_dialog(page, answer_and_settle())
        if isinstance(done, Pending):
            # The answer went and the page waits again: the site refused it (or its new page opened a dialog).
            again = done.challenge is not None and done.challenge.origin == challenge.origin
            return {**answered, "outcome": "asked_again" if again else "dialog", "url": page.url}
        return {**answered, "outcome": done, "url": page.url}

    def dialogs_describe(self) -> list[dict[str, Any]]:
        return self.dialogs.describe()

    @_takes(ops.NoArgs)
    async def op_dialogs(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        """The dialogs waiting for an answer, read without a lease or a grant."""
        return {"dialogs": self.dialogs.describe()}

    # --- the cookie journal ----------------------------------------------------

    async def _keep_journal(self) -> None:
        while self.profile is not None:
            await asyncio.sleep(JOURNAL_SECONDS)
            try:
                await self._save_journal()
            except Exception:
                logger.warning("could not write the cookie journal of %s", self.computer_id, exc_info=True)

    async def _save_journal(self) -> None:
        """Rewrite the journal when the browser's cookies changed (values never logged)."""
        if self.profile is None or self.context is None or self.profile_generation is None:
            return
        context, generation = self.context, self.profile_generation
        cookies = [dict(c) for c in await context.cookies()]
        if cookies == self.journal_cookies or context is not self.context:
            return
        await asyncio.to_thread(self.profile.journal_save, generation, cookies)
        self.journal_cookies = cookies

    def stop(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop_event.set)

    def _address_of(self, server: Server) -> str:
        host, port = server.sockets[0].getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def _register(self) -> None:
        if not await self.server.register(generation=self.generation, address=self.address):
            logger.warning("computer %s does not exist; serving unregistered", self.computer_id)

    async def _watch_browser(self) -> None:
        """Every heartbeat period, on the executor's loop: expire the human grant, check the browser."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self.control.expire()
            if not await self._browser_alive():
                self._browser_failed("no answer")
                return

    def _heartbeats(self) -> None:
        """Heartbeats from a thread of their own, on a fixed schedule of ``HEARTBEAT_SECONDS``.

        Nothing the event loop does (frames, a long action, a slow browser check on a loaded host)
        delays them, so a live executor never reads stale, and the server can call one silent for
        two heartbeats dead (``executor.selectors``). What an answer asks for (renew the profile,
        stop) is done on the executor's loop, and the next heartbeat waits for it.
        """
        next_beat = time.monotonic()
        while True:
            next_beat = max(next_beat + HEARTBEAT_SECONDS, time.monotonic())
            if self.beats_stop.wait(max(0.0, next_beat - time.monotonic())):
                return
            generation = self.generation
            try:
                current = asyncio.run(self._heartbeat_once(generation))
            except LinkError as exc:
                if exc.status in (401, 403):
                    # The executor token was rotated or revoked: this generation ends with it.
                    logger.error("the server refused the executor token of %s; stopping", self.computer_id)
                    self._on_loop(self._stop_now())
                    return
                logger.warning("heartbeat failed: %s", exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the next heartbeat tries again
                logger.warning("heartbeat failed: %s", type(exc).__name__)
                continue
            if current == HEARTBEAT_CURRENT:
                continue
            self._on_loop(self._heartbeat_answered(current, generation))
            if current != HEARTBEAT_ENDED:
                return

    async def _heartbeat_once(self, generation: uuid.UUID) -> str:
        async with asyncio.timeout(HEARTBEAT_SECONDS):
            return await self.server.heartbeat(generation=generation)

    def _on_loop(self, coroutine: Any) -> None:
        """From the heartbeat thread: run ``coroutine`` on the executor's loop and wait for it."""
        if self.loop is None or self.loop.is_closed() or self.beats_stop.is_set():
            coroutine.close()
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=300)

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

    async def _browser_alive(self) -> bool:
        """One CDP round trip: a remote session that died without closing its socket is noticed here.

        A closed connection fails at once; a browser that is only slow (a loaded host) must miss
        three heartbeats in a row before it counts as lost.
        """
        if self.browser_cdp is None:
            return True
        try:
            # Answered by the browser process, not a page: a busy page is not a dead browser.
            async with asyncio.timeout(HEARTBEAT_SECONDS):
                await self.browser_cdp.send("Browser.getVersion")
        except TimeoutError:
            self.missed_heartbeats += 1
            logger.warning("browser of %s did not answer in time (%d)", self.computer_id, self.missed_heartbeats)
            return self.missed_heartbeats < 3
        except Exception as exc:  # noqa: BLE001 - the connection to the browser is gone
            logger.error("browser of %s is gone: %s", self.computer_id, type(exc).__name__)
            return False
        self.missed_heartbeats = 0
        return True

    async def _browser_lost(self) -> bool:
        """Whether the browser itself is gone (an operation's error then says so, not the page's)."""
        if self.failed:
            return True
        if self.browser_cdp is None:
            return False
        try:
            async with asyncio.timeout(LOST_CHECK_SECONDS):
                await self.browser_cdp.send("Browser.getVersion")
        except Exception:  # noqa: BLE001 - no answer from the browser process: it is gone
            return True
        return False

    def _browser_failed(self, reason: str = "") -> None:
        if self.failed or self.stopping:
            return
        self.failed = True
        logger.error("browser of %s failed (%s)", self.computer_id, reason)
        self.control.fail()
        # The process ends; a restart is a new generation.
        asyncio.get_running_loop().call_later(0.5, self.stop_event.set)

    # --- the private interface ----------------------------------------------

    def _authorise(self, connection: ServerConnection, request: Request) -> Response | None:
        supplied = request.headers.get("Authorization", "")
        expected = f"Bearer {self.token}"
        if not hmac.compare_digest(supplied.encode(), expected.encode()):
            return connection.respond(401, "Executor token required.\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        peer = Peer(ws)
        self.peers.add(peer)
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for message in ws:
                if not isinstance(message, str):
                    break
                task = asyncio.create_task(self._serve_request(peer, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except ConnectionClosed:
            pass
        finally:
            self.peers.discard(peer)
            for task in tasks:
                task.cancel()
            await self._unsubscribe(peer)

    async def _serve_request(self, peer: Peer, message: str) -> None:
        """One request of the private interface, dispatched through the op registry (executor/ops.py):
        its arguments validated before the handler runs, its reply validated before it is sent."""
        request_id: Any = None
        try:
            request = json.loads(message)
            if not isinstance(request, dict):
                raise ops.OpRefused("A request is a JSON object.")
            request_id = request.get("id")
            op, args = ops.op_args(request.get("op"), request.get("args"))
            limit = CALL_TIMEOUT_SECONDS
            if isinstance(args, ops.AgentArgs) and args.action in actions.AGENT_ACTIONS:
                limit = actions.AGENT_ACTIONS[args.action].timeout_seconds()
            async with asyncio.timeout(limit):
                result = await OP_HANDLERS[op.name](self, peer, args)
            reply: dict[str, Any] = {"id": request_id, "ok": True, "result": _checked_reply(op, args, result)}
        except (ControlError, ops.OpRefused) as exc:
            reply = {"id": request_id, "ok": False, "error": exc.message, "reason": exc.reason}
        except pydantic.ValidationError as exc:
            reply = {
                "id": request_id,
                "ok": False,
                "error": f"Invalid arguments: {ops.where(exc)}.",
                "reason": "bad_request",
            }
        except TimeoutError:
            reply = {"id": request_id, "ok": False, "error": "The browser did not finish in time.", "reason": "timeout"}
        except (ValueError, KeyError, TypeError) as exc:
            logger.debug("bad request", exc_info=True)
            reply = {
                "id": request_id,
                "ok": False,
                "error": f"Invalid request: {type(exc).__name__}.",
                "reason": "bad_request",
            }
        except Exception as exc:  # a browser error: report it plainly, never its page content
            logger.warning("operation failed: %s", type(exc).__name__)
            if await self._browser_lost():
                # A remote session the vendor ended, a browser that crashed: not the page's doing.
                reply = {"id": request_id, "ok": False, "error": BROWSER_LOST, "reason": "unavailable"}
            else:
                reply = {"id": request_id, "ok": False, "error": _browser_error(exc), "reason": "browser_error"}
        # The backstop: no string the executor answers carries a secret it typed (executor/taint.py).
        reply = taint.redact(reply)
        with contextlib.suppress(ConnectionClosed):
            await peer.send(json.dumps(reply, separators=(",", ":")))

    @_takes(ops.NoArgs)
    async def op_hello(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        return {
            "computer_id": self.computer_id,
            "generation": str(self.generation),
            "control": self.control.state,
            "viewport": {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT},
        }

    @_takes(ops.NoArgs)
    async def op_status(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        self.control.expire()
        return {
            "generation": str(self.generation),
            "control": self.control.state,
            "url": self.page.url,
            "tabs": await self._tabs_describe(),
            "dialogs": self.dialogs.describe(),
            "subscribers": len(self.subscribers),
            "screencasting": self.screencasting,
            "raw_frames": self.raw_frames,
            "screencast_refreshes": self.pacer.refreshes,
            "inputs": self.inputs_dispatched,
        }

    @_takes(ops.ObserveArgs)
    async def op_observe(self, peer: Peer, args: ops.ObserveArgs) -> dict[str, Any]:
        """Read the page without touching it (no lease): address, title and visible text, bounded.

        ``innerText`` never includes what is typed into inputs, so a typed password is never in it.
        """
        limit = args.max_chars
        if self.dialogs.on_page(self.page) is not None:
            # A page blocked by a dialog answers nothing until the dialog is answered.
            title, text = next((t["title"] for t in await self._tabs_describe() if t["active"]), ""), ""
        else:
            title = await self.page.title()
            text = str(await self.page.evaluate("() => document.body ? document.body.innerText : ''") or "")
        return {
            "url": self.page.url,
            "title": str(title)[:500],
            "text": text[:limit],
            "truncated": len(text) > limit,
            "control": self.control.state,
            "tabs": await self._tabs_describe(),
            "dialogs": self.dialogs.describe(),
        }

    @_takes(ops.ArgumentsCheckArgs)
    async def op_arguments_check(self, peer: Peer, args: ops.ArgumentsCheckArgs) -> dict[str, Any]:
        """Whether ``values`` (a step's summary, before the server records it) carries a secret this
        browser holds, in any form ``taint.check_arguments`` knows: the server withholds such a
        summary whole, so no record or event holds a right guess (executor/taint.py). No lease."""
        return {"carries_secret": taint.supplies_secret(args.values)}

    @_takes(ops.NoArgs)
    async def op_tabs(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        """The open pages (id, title, url, active), read without a lease or a grant."""
        return {"tabs": await self._tabs_describe()}

    # frames

    @_takes(ops.SubscribeArgs)
    async def op_subscribe(self, peer: Peer, args: ops.SubscribeArgs) -> dict[str, Any]:
        max_fps = args.max_fps
        await self._unsubscribe(peer)
        subscriber = Subscriber(connection=peer, max_fps=max_fps)
        peer.subscriber = subscriber
        self.subscribers.add(subscriber)
        subscriber.task = asyncio.create_task(self._feed(subscriber))
        if not self.screencasting:
            await self._start_screencast()
        elif self.latest is not None:
            subscriber.wake.set()
        return {}

    @_takes(ops.NoArgs)
    async def op_unsubscribe(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        await self._unsubscribe(peer)
        return {}

    async def _unsubscribe(self, peer: Peer) -> None:
        subscriber = peer.subscriber
        if subscriber is None:
            return
        peer.subscriber = None
        self.subscribers.discard(subscriber)
        if subscriber.task is not None:
            subscriber.task.cancel()
        if not self.subscribers and self.screencasting:
            await self._stop_screencast()

    async def _start_screencast(self) -> None:
        self.screencasting = True
        self.latest = None
        self.latest_data = ""
        self.pacer.reset()
        await self.cdp.send("Page.startScreencast", SCREENCAST)

    async def _stop_screencast(self) -> None:
        self.screencasting = False
        self.latest = None
        self.latest_data = ""
        self.pacer.reset()  # Chromium starts counting unacknowledged frames afresh at the next start
        with contextlib.suppress(Exception):
            await self.cdp.send("Page.stopScreencast")

    async def _capture_now(self) -> None:
        """The page as it is now, offered like a screencast frame (executor/screencast.py)."""
        if not self.screencasting:
            return
        shot = await self.cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": JPEG_QUALITY})
        if self.screencasting:
            self.raw_frames += 1
            self._offer(shot["data"], only_if_new=True)

    def _next_slot(self) -> float | None:
        """The earliest slot that still needs a new frame: a subscriber with a frame waiting for its
        next slot needs the one after (else each frame caught before its slot would release
        another capture for the same slot: about 1.7 captures per delivered frame, ``make bench``)."""
        latest = self.latest.number if self.latest is not None else 0
        return min(
            (s.next_slot + (1.0 / s.max_fps if s.sent_number < latest else 0.0) for s in self.subscribers),
            default=None,
        )

    def _min_interval(self) -> float:
        return 1.0 / max((s.max_fps for s in self.subscribers), default=1)

    def _screencast_frame(self, params: dict[str, Any]) -> None:
        if not self.screencasting:
            asyncio.get_running_loop().create_task(self._ack(params["sessionId"]))
            return
        self.raw_frames += 1
        self.pacer.frame(params["sessionId"])
        self._offer(params["data"])

    def _offer(self, data: str, *, only_if_new: bool = False) -> None:
        """A captured JPEG (base64) becomes the latest frame (a refresh only when it shows something new)."""
        if only_if_new and data == self.latest_data:
            return
        self.latest_data = data
        jpeg = base64.b64decode(data)
        if self.settings.viewport_size != (VIEWPORT_WIDTH, VIEWPORT_HEIGHT):
            jpeg = framed(jpeg)
        if len(jpeg) > MAX_FRAME_BYTES:
            logger.warning("dropped a frame of %d bytes (limit %d)", len(jpeg), MAX_FRAME_BYTES)
            return
        self.frame_count += 1
        self.latest = Frame(number=self.frame_count, jpeg=jpeg, url=self.page.url, captured_at=time.time())
        for subscriber in self.subscribers:
            subscriber.wake.set()

    async def _ack(self, session_id: int) -> None:
        with contextlib.suppress(Exception):
            await self.cdp.send("Page.screencastFrameAck", {"sessionId": session_id})

    async def _feed(self, subscriber: Subscriber) -> None:
        """Send this subscriber the latest frame, at most ``max_fps`` in any one-second window.

        Slots follow a steady grid: a frame arriving a little after its slot does not
        push the next slot back (that would lose a slot at every late frame), and two
        frames are never closer than half an interval; the window (``FrameWindow``) bounds
        what the grid would let a late frame's successors catch up. The first frame leaves at once.
        """
        interval = 1.0 / subscriber.max_fps
        window = FrameWindow(subscriber.max_fps)
        next_slot = 0.0
        try:
            while True:
                await subscriber.wake.wait()
                subscriber.wake.clear()
                delay = next_slot - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                frame = self.latest
                if frame is None or frame.number == subscriber.sent_number:
                    continue
                now = time.monotonic()
                window.record(now)
                next_slot = max(next_slot + interval, now + interval / 2, window.opens_at())
                subscriber.next_slot = next_slot
                subscriber.sent_number = frame.number
                meta = {
                    "url": taint.redact_text(frame.url),
                    "control": self.control.frame_control(),
                    "captured_at": frame.captured_at,
                    "width": VIEWPORT_WIDTH,
                    "height": VIEWPORT_HEIGHT,
                }
                await subscriber.connection.send(pack_frame(meta, frame.jpeg))
        except ConnectionClosed:
            pass

    # control

    def _control_changed(self) -> None:
        if self.control.state != "human" and self.held:
            asyncio.get_running_loop().create_task(self._settle_held())
        message = json.dumps({"event": "control", "control": self.control.state, "version": self.control.version})
        for peer in list(self.peers):
            asyncio.get_running_loop().create_task(self._push(peer, message))
        # A frame's ``control`` must not lag behind a change: re-offer the latest.
        for subscriber in self.subscribers:
            if self.latest is not None:
                self.frame_count += 1
                self.latest = Frame(self.frame_count, self.latest.jpeg, self.latest.url, self.latest.captured_at)
            subscriber.wake.set()

    async def _push(self, peer: Peer, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await peer.send(message)

    def _download_started(self, download: Download) -> None:
        """A page started a download: once finished, its bytes go to the server, which keeps them as
        an artifact of the computer's account (the ``downloads`` operation of the server link)."""
        self.downloads.add(download)
        task = asyncio.get_running_loop().create_task(self._download_settle(download))
        self.download_tasks.add(task)
        task.add_done_callback(self.download_tasks.discard)

    async def _download_settle(self, download: Download) -> None:
        failure: str | None = "failed"
        path: Path | None = None
        try:
            failure = await download.failure()
            if failure is None:
                path = Path(await download.path())
        except Exception:  # noqa: BLE001 - the browser went away: the download failed
            failure = "failed"
        finally:
            self.downloads.discard(download)
        name = clean_filename(download.suggested_filename, fallback="download")
        report: dict[str, Any]
        if path is None:
            report = {"outcome": "cancelled" if failure == "canceled" else "failed", "filename": name}
        else:
            try:
                size = path.stat().st_size
                # Over the limit it is not even sent (the server refuses over its own limit too).
                stored = None
                if size <= settings.RAM_DOWNLOAD_MAX_BYTES:
                    size, sha256 = await asyncio.to_thread(file_digest, path)
                    stored = await self.server.download_store(path=path, filename=name, size=size, sha256=sha256)
                report = (
                    {"outcome": "stored", **stored.as_dict()}
                    if stored is not None
                    else {"outcome": "refused", "filename": name, "size": size, "reason": "too_large"}
                )
            except Exception:  # noqa: BLE001 - the server or its storage down: reported, never retried
                logger.warning("a download of %s could not be stored", self.computer_id, exc_info=True)
                report = {"outcome": "failed", "filename": name}
            finally:
                with contextlib.suppress(Exception):
                    await download.delete()  # it is an artifact now (or refused): the download area keeps nothing
        self.finished_downloads = [*self.finished_downloads, report][-MAX_REPORTED_DOWNLOADS:]

    async def _downloads_report(self, deadline: float) -> list[dict[str, Any]]:
        """The downloads finished since the last report, after waiting (until ``deadline``, loop time,
        and at most ``RAM_DOWNLOAD_WAIT_SECONDS``) for those still running; those still running after
        that are reported with a later action."""
        await asyncio.sleep(0)  # a download announced with the action's last answer is dispatched first
        loop = asyncio.get_running_loop()
        until = min(deadline, loop.time() + float(settings.RAM_DOWNLOAD_WAIT_SECONDS))
        if self.download_tasks and until > loop.time():
            await asyncio.wait(set(self.download_tasks), timeout=until - loop.time())
        report, self.finished_downloads = self.finished_downloads, []
        return report

    async def _cancel_downloads(self) -> int:
        running = list(self.downloads)
        for download in running:
            with contextlib.suppress(Exception):
                await download.cancel()
            self.downloads.discard(download)
        return len(running)

    @_takes(ops.NoArgs)
    async def op_takeover(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        grant, counters = await self.control.takeover()
        return {
            "grant_id": grant.id,
            "version": self.control.version,
            "expires_in": HUMAN_GRANT_SECONDS,
            "stopped_processes": counters.stopped_processes,
            "cancelled_downloads": counters.cancelled_downloads,
            "aborted_exports": counters.aborted_exports,
        }

    @_takes(ops.GrantArgs)
    async def op_grant_renew(self, peer: Peer, args: ops.GrantArgs) -> dict[str, Any]:
        self.control.grant_renew(args.grant_id)
        return {"expires_in": HUMAN_GRANT_SECONDS}

    @_takes(ops.GrantArgs)
    async def op_grant_release(self, peer: Peer, args: ops.GrantArgs) -> dict[str, Any]:
        self.control.grant_release(args.grant_id)
        return {}

    @_takes(ops.InputArgs)
    async def op_input(self, peer: Peer, args: ops.InputArgs) -> dict[str, Any]:
        value, grant_id = args.input, args.grant_id
        self.control.grant_check(grant_id)
        async with self.input_lock:
            self.control.grant_check(grant_id)
            # Counted where it acts: the proof's WebSocket fuzz checks that no refused message got here.
            self.inputs_dispatched += 1
            EXECUTOR_INPUTS.labels(type=value.type).inc()
            if self.held and self.held.grant_id != grant_id:
                await actions.release_held(self.page, self.held)
            self.held.grant_id = grant_id
            if isinstance(value, TabInput):
                # Keys and buttons held on one page are released before another page gets the input.
                await actions.release_held(self.page, self.held)
                await (self.tab_switch if value.action == "switch" else self.tab_close)(value.tab)
            elif isinstance(value, DialogInput):
                if value.credentials() is not None:
                    taint.remember_secrets(self.page, value.credentials() or ())
                await self.dialog_answer(
                    value.dialog, accept=value.accept, text=value.text, credentials=value.credentials()
                )
            elif self.dialogs.on_page(self.page) is None:
                typing = isinstance(value, TextInput) or (isinstance(value, KeyInput) and value.phase == "down")
                if typing:
                    # A field a person types into is tainted (and masked) before the first key lands,
                    # and again after the key, which may have moved focus (executor/taint.py).
                    await taint.mark_focused(self.page)
                # An input that opens a dialog is done once dispatched (its ack does not wait for the answer).
                await self._unless_dialog(self.page, actions.human_input(self.page, value, self.held))
                if typing:
                    # What the person typed is remembered for redaction, as a stored secret is.
                    await taint.mark_focused(self.page, learn=True)
            # Otherwise the page is blocked by its dialog, as in a browser: the input is dropped.
        return {}

    async def _settle_held(self) -> None:
        """Release what an ended grant left pressed, before the next holder's first action.

        Every input and agent action waits for ``input_lock``, and each also settles
        first, so nobody acts on a computer with a key or button still held.
        """
        async with self.input_lock:
            await self._settle_held_locked()

    async def _settle_held_locked(self) -> None:
        grant = self.control.grant
        if self.held and (self.control.state != "human" or grant is None or grant.id != self.held.grant_id):
            await actions.release_held(self.page, self.held)

    # the agent

    @_takes(ops.NoArgs)
    async def op_lease_acquire(self, peer: Peer, args: ops.NoArgs) -> dict[str, Any]:
        lease = self.control.lease_acquire()
        return {"lease_id": lease.id, "expires_in": lease.expires_at - self.control.clock.monotonic()}

    @_takes(ops.LeaseArgs)
    async def op_lease_renew(self, peer: Peer, args: ops.LeaseArgs) -> dict[str, Any]:
        lease = self.control.lease_renew(args.lease_id)
        return {"expires_in": lease.expires_at - self.control.clock.monotonic()}

    @_takes(ops.LeaseArgs)
    async def op_lease_release(self, peer: Peer, args: ops.LeaseArgs) -> dict[str, Any]:
        self.control.lease_release(args.lease_id)
        return {}

    @_takes(ops.AgentArgs)
    async def op_agent(self, peer: Peer, args: ops.AgentArgs) -> dict[str, Any]:
        action = actions.AGENT_ACTIONS.get(args.action)
        if action is None:
            raise ControlError(f"Unknown agent action {args.action[:40]!r}.", "bad_request")
        # Validated before anything runs: a refused argument never reaches the page.
        call = action.bind(args.args, args.context)
        # Nothing the agent supplies may carry a secret the browser holds: the answer (redacted)
        # would tell a right guess from a wrong one (executor/taint.py).
        taint.check_arguments(args.args)
        lease_id = args.lease_id
        self.control.lease_check(lease_id)
        page = self.page
        # The reply leaves time to answer within the action's limit.
        deadline = asyncio.get_running_loop().time() + action.timeout_seconds() - 2
        self._refuse_if_blocked(page, action)

        act = actions.ActionContext(
            page=page, computer_id=self.computer_id, server=self.server, browser=self, backend=self.backend
        )

        async def run() -> dict[str, Any]:
            async with self.input_lock:
                self.control.lease_check(lease_id)
                await self._settle_held_locked()
                if action.beside_dialog:
                    result = await call(act)
                else:
                    self._refuse_if_blocked(page, action)  # a dialog may have opened while the lock was awaited
                    done = await self._unless_dialog(page, call(act))
                    if isinstance(done, Pending):
                        # The action's effect happened and the page opened a dialog: the agent is told.
                        result = {"url": page.url, "dialog_opened": done.describe()}
                    else:
                        result = dict(done)
                if self.downloads or self.finished_downloads or self.download_tasks or action.name in DOWNLOADING:
                    downloads = await self._downloads_report(deadline)
                    if downloads:
                        result = {**result, "downloads": downloads}
                return result

        task = asyncio.create_task(run())
        self.control.track_agent_task(task, export=action.export)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise ControlError(
                    "A human has control of this computer; the agent's action was stopped.", "human_control"
                ) from None
            task.cancel()
            raise

    def _refuse_if_blocked(self, page: Page, action: actions.AgentAction) -> None:
        """An action other than answering (or a tab action) never reaches a page a dialog blocks."""
        blocking = self.dialogs.on_page(page)
        if blocking is not None and blocking.challenge is not None and not action.beside_dialog:
            raise ControlError(
                f"The active tab waits on a site's sign-in prompt ({blocking.id}); answer it with auth_answer "
                "(or cancel it) first.",
                "dialog_open",
            )
        if blocking is not None and not action.beside_dialog:
            raise ControlError(
                f"The active tab shows a {blocking.kind} dialog ({blocking.id}) that blocks the page; "
                "answer it with dialog_answer first.",
                "dialog_open",
            )


OpHandler = Callable[[Executor, Peer, Any], Awaitable[dict[str, Any]]]
# The handler of each operation of executor/ops.py (the registry checks, at import, that none is missing).
OP_HANDLERS: dict[str, OpHandler] = {
    "hello": Executor.op_hello,
    "status": Executor.op_status,
    "observe": Executor.op_observe,
    "arguments_check": Executor.op_arguments_check,
    "tabs": Executor.op_tabs,
    "dialogs": Executor.op_dialogs,
    "subscribe": Executor.op_subscribe,
    "unsubscribe": Executor.op_unsubscribe,
    "takeover": Executor.op_takeover,
    "grant_renew": Executor.op_grant_renew,
    "grant_release": Executor.op_grant_release,
    "input": Executor.op_input,
    "lease_acquire": Executor.op_lease_acquire,
    "lease_renew": Executor.op_lease_renew,
    "lease_release": Executor.op_lease_release,
    "agent": Executor.op_agent,
}
if (
    set(OP_HANDLERS) != set(ops.OPS)
    or any(getattr(handler, "args_model", None) is not ops.OPS[name].args for name, handler in OP_HANDLERS.items())
    or set(ops.ACTION_REPLIES) != set(actions.AGENT_ACTIONS)
):
    raise RuntimeError("executor/ops.py and the executor's handlers (or agent actions) disagree")


def _checked_reply(op: ops.Op, args: Any, result: dict[str, Any]) -> dict[str, Any]:
    """The handler's result validated into the operation's reply model, as it goes on the wire; a
    result that does not match is a defect, logged and answered ``bad_reply`` (never sent)."""
    try:
        return op.reply_for(args, result).model_dump(mode="json", exclude_unset=True)
    except (pydantic.ValidationError, KeyError) as exc:
        where = ops.where(exc) if isinstance(exc, pydantic.ValidationError) else "no reply model"
        logger.error("the executor's reply to %s does not match its model (%s)", op.name, where)
        raise ControlError(f"The executor's reply to {op.name} did not match its contract.", "bad_reply") from None


async def _quietly(work: Any) -> None:
    with contextlib.suppress(Exception):
        await work


# Around a viewport smaller than the contract's: the frame's background.
FRAME_BACKGROUND = (32, 33, 36)


def framed(jpeg: bytes) -> bytes:
    """A capture of a smaller viewport at the top-left corner of a 1280 × 720 frame: the screen
    contract's frames are always 1280 × 720, and a point of the frame is the same point of the page."""
    try:
        with Image.open(io.BytesIO(jpeg)) as shot:
            if shot.size == (VIEWPORT_WIDTH, VIEWPORT_HEIGHT):
                return jpeg
            frame = Image.new("RGB", (VIEWPORT_WIDTH, VIEWPORT_HEIGHT), FRAME_BACKGROUND)
            frame.paste(
                shot.convert("RGB").crop((0, 0, min(shot.width, VIEWPORT_WIDTH), min(shot.height, VIEWPORT_HEIGHT)))
            )
    except (OSError, ValueError):  # not an image Pillow can read: passed on as it came
        return jpeg
    out = io.BytesIO()
    frame.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _browser_error(exc: Exception) -> str:
    """A plain reason without page content or URLs (which may carry private values)."""
    if type(exc).__name__ == "TimeoutError":
        return "The browser did not finish in time."
    code = re.search(r"net::ERR_[A-Z_]+", str(exc))
    if code:
        return f"The page could not be loaded ({code.group(0)})."
    return "The browser reported an error."


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
