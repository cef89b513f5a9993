"""The browser's downloads: once finished, their bytes go to the server, which keeps them as
artifacts of the computer's account (the ``downloads`` operation of the server link); the
next agent action's reply reports them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import Download

from executor.filenames import clean_filename
from executor.server_link import ServerLink, file_digest

logger = logging.getLogger(__name__)

# The most finished downloads kept for the next agent action's reply (older ones are dropped).
MAX_REPORTED_DOWNLOADS = 50
# The actions that may start a download: their reply looks for one (Playwright's click, press and
# goto return once a navigation they started has committed or turned into a download).
DOWNLOADING = frozenset({"click", "press", "navigate"})


class Downloads:
    def __init__(self, *, computer_id: str, server: ServerLink) -> None:
        self.computer_id = computer_id
        self.server = server
        self.running: set[Download] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        # Downloads finished (stored, refused, failed) and not yet reported with an agent action.
        self.finished: list[dict[str, Any]] = []

    def pending(self) -> bool:
        """Whether a download runs, settles, or waits to be reported."""
        return bool(self.running or self.finished or self.tasks)

    def started(self, download: Download) -> None:
        """A page started a download: it is stored once finished."""
        self.running.add(download)
        task = asyncio.get_running_loop().create_task(self._settle(download))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _settle(self, download: Download) -> None:
        failure: str | None = "failed"
        path: Path | None = None
        try:
            failure = await download.failure()
            if failure is None:
                path = Path(await download.path())
        except Exception:  # noqa: BLE001 - the browser went away: the download failed
            failure = "failed"
        finally:
            self.running.discard(download)
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
        self.finished = [*self.finished, report][-MAX_REPORTED_DOWNLOADS:]

    async def report(self, deadline: float) -> list[dict[str, Any]]:
        """The downloads finished since the last report, after waiting (until ``deadline``, loop time,
        and at most ``RAM_DOWNLOAD_WAIT_SECONDS``) for those still running; those still running after
        that are reported with a later action."""
        await asyncio.sleep(0)  # a download announced with the action's last answer is dispatched first
        loop = asyncio.get_running_loop()
        until = min(deadline, loop.time() + float(settings.RAM_DOWNLOAD_WAIT_SECONDS))
        if self.tasks and until > loop.time():
            await asyncio.wait(set(self.tasks), timeout=until - loop.time())
        report, self.finished = self.finished, []
        return report

    async def cancel(self) -> int:
        """Cancel the running downloads (a takeover, a renewal); how many there were."""
        running = list(self.running)
        for download in running:
            with contextlib.suppress(Exception):
                await download.cancel()
            self.running.discard(download)
        return len(running)

    async def end(self) -> None:
        """A generation ended: running downloads are cancelled, and nothing of it is reported to the next."""
        await self.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=5)
        self.finished = []
