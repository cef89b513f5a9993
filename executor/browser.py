"""The computer's browser: its backend, its launch, its context and profile, and its health.

The backend (``executor/backends``) is the computer's own, read from its row (its secret
from Vault) at start unless given; the browser's settings (viewport, locale, proxy) are read
each time it starts. On ``local`` with a profile the browser runs on the computer's
persistent profile, whose cookies are journaled beside it; otherwise in a fresh context.
Its pages are ``pages`` (``executor/pages.py``). A browser that stops answering or closes
without being asked to calls ``on_failed``: the executor then ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from executor import egress, profile_store
from executor.backends import BackendUnavailable, BrowserBackend, EgressUnenforceable, LocalBackend, backend_for, scrub
from executor.contracts import ComputerSettings, computer_settings
from executor.control import ControlError
from executor.pages import Pages
from executor.profile import Profile
from executor.rpc import browser_error
from executor.server_link import HEARTBEAT_SECONDS, LinkError, ServerLink
from vault_bridge.credentials import (
    VaultRefused,
    VaultUnavailable,
    browser_vendor_secret_read,
    computer_proxy_credentials_read,
)

logger = logging.getLogger(__name__)

# How long an operation's error waits for the browser process to answer before calling it lost.
LOST_CHECK_SECONDS = 2.0
# How often the cookie journal is compared with the browser's cookies (and rewritten when they changed).
JOURNAL_SECONDS = 1.0


class ComputerBrowser:
    """``pages`` is made by ``make_pages`` with this browser's context and state; ``backend``
    None: the computer's own, read from its row at start (``register``: the executor is tied to
    a Computer row; one that is not runs ``local`` with the default settings)."""

    def __init__(
        self,
        *,
        computer_id: str,
        server: ServerLink,
        register: bool,
        sandbox: bool,
        backend: BrowserBackend | None,
        profile: Profile | None,
        on_failed: Callable[[], None],
        make_pages: Callable[[ComputerBrowser], Pages],
    ) -> None:
        self.computer_id = computer_id
        self.server = server
        self.register = register
        self.sandbox = sandbox
        # None: the computer's own backend, read from its row (and its secret from Vault) at start.
        self.backend: BrowserBackend | None = backend
        self.from_row = backend is None and register
        # The computer's persistent browser profile on disk; None: an in-memory one per generation.
        self.profile = profile
        self.profile_generation: uuid.UUID | None = None
        self.journal_cookies: list[dict[str, Any]] = []
        self.proxy_address = ""
        self.playwright: Any = None
        self.browser: Any = None
        self.browser_cdp: Any = None
        self.context: Any = None
        self.missed_heartbeats = 0
        self.failed = False
        # The browser is being closed on purpose (a renewal, a stop): its closing is no failure.
        self.stopping = False
        self.egress = egress.EgressProxy()
        # The computer's browser settings, read from its row each time its browser starts
        # (an executor that does not register keeps the defaults).
        self.settings = ComputerSettings()
        self._on_failed = on_failed
        self.pages = make_pages(self)

    async def prepare(self) -> None:
        """Before the first start: the backend (read from the row unless given) and the egress proxy."""
        if self.backend is None:
            # An executor that does not register (tests, benchmarks) is not tied to a row: local.
            self.backend = await self.load_backend() if self.register else LocalBackend(sandbox=self.sandbox)
        self.check_egress(self.backend)
        self.proxy_address = await self.proxy_for(self.backend)

    @staticmethod
    def check_egress(backend: BrowserBackend) -> None:
        if not backend.owns_network and not settings.RAM_BROWSER_EGRESS_REMOTE_ACCEPT:
            raise EgressUnenforceable(
                f"The {backend.name} backend's browser is not on RAM's network, so the egress policy cannot be "
                "fully enforced there (it covers " + egress.REMOTE_COVERS + "; not " + egress.REMOTE_MISSES + "). "
                "Set RAM_BROWSER_EGRESS_REMOTE_ACCEPT=true to run it with that partial policy."
            )

    async def proxy_for(self, backend: BrowserBackend) -> str:
        """The egress proxy's address for a browser RAM launches (started once)."""
        if not backend.owns_network:
            return ""
        return self.egress.address or await self.egress.start()

    async def load_backend(self) -> BrowserBackend:
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

    def persistent(self) -> Profile | None:
        """The profile on disk the browser runs on: the ``local`` backend of an executor given a
        profile. None for a remote backend, whose profile is its vendor session (or its context)."""
        return self.profile if isinstance(self.backend, LocalBackend) else None

    async def start(self, proxy_address: str) -> None:
        """Obtain the backend's browser (a vendor session is recorded before anything else can fail)."""
        backend = self._backend
        self.proxy_address = proxy_address
        if self.persistent():
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
        browser.on("disconnected", lambda gone: self.fail("disconnected") if gone is self.browser else None)

    async def close(self) -> None:
        """Close the context and the browser (a persistent context ends its browser, which writes
        its profile) and give back a vendor session."""
        backend, browser, context = self.backend, self.browser, self.context
        self.browser = self.browser_cdp = self.context = None  # their closing is not a failure
        self.pages.clear(context)
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
        profile = self.persistent()
        if profile is not None and isinstance(backend, LocalBackend):
            generation = await self.server.profile_generation()
            if generation is None:
                raise RuntimeError(f"No computer {self.computer_id!r}.")
            if self.register:
                # The last profile a clean stop stored, unless this host's copy is that one (a new
                # host, a wiped directory, a copy older than the computer's last run elsewhere).
                await profile_store.restore(self.server, profile, profile_generation=generation)
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
                raise BackendUnavailable(f"The local browser did not start: {browser_error(exc)}") from None
            context.on("close", lambda _context: self.fail("closed") if context is self.context else None)
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
        await self.pages.open(context, await backend.first_page(context, self.settings))

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

    # --- the cookie journal

    async def keep_journal(self) -> None:
        while self.profile is not None:
            await asyncio.sleep(JOURNAL_SECONDS)
            try:
                await self.save_journal()
            except Exception:
                logger.warning("could not write the cookie journal of %s", self.computer_id, exc_info=True)

    async def save_journal(self) -> None:
        """Rewrite the journal when the browser's cookies changed (values never logged)."""
        if self.profile is None or self.context is None or self.profile_generation is None:
            return
        context, generation = self.context, self.profile_generation
        cookies = [dict(c) for c in await context.cookies()]
        if cookies == self.journal_cookies or context is not self.context:
            return
        await asyncio.to_thread(self.profile.journal_save, generation, cookies)
        self.journal_cookies = cookies

    async def store_profile(self, generation: uuid.UUID) -> bool:
        """At a clean stop, once the browser closed: the profile to the store any host restores from."""
        profile = self.persistent()
        if profile is None or self.profile_generation is None or not self.register or self.failed:
            return False
        return await profile_store.store(
            self.server, profile, generation=generation, profile_generation=self.profile_generation
        )

    async def alive(self) -> bool:
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

    async def lost(self) -> bool:
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

    def fail(self, reason: str = "") -> None:
        if self.failed or self.stopping:
            return
        self.failed = True
        logger.error("browser of %s failed (%s)", self.computer_id, reason)
        self._on_failed()

    async def renew(self) -> None:
        """A new generation's browser: everything of the old profile goes (a vendor session
        released, a profile on disk wiped, an in-memory context closed) before the new one starts."""
        old_generation = self.profile_generation
        if self.from_row:
            # The computer's backend is read again from its row — it may be another backend, other
            # options, or another owner's secret —: the old browser is closed (a vendor session
            # released, a profile on disk wiped) before the new one is obtained.
            profile = self.persistent()
            self.stopping = True
            await self.close()
            self.stopping = False
            if profile is not None and old_generation is not None:
                await asyncio.to_thread(profile.wipe, old_generation)
            self.backend = await self.load_backend()
            self.check_egress(self.backend)
            proxy = await self.proxy_for(self.backend)
            self.missed_heartbeats = 0
            await self.start(proxy)
        elif self.backend is not None and self.backend.session_per_profile:
            # A vendor session is one profile: the old one is released, a new one created.
            self.stopping = True
            await self.close()
            self.stopping = False
            await self.start("")
        elif (profile := self.persistent()) is not None:
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

    @property
    def _backend(self) -> BrowserBackend:
        if self.backend is None:
            raise ControlError("The browser is not started.", "unavailable")
        return self.backend
