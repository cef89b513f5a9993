"""The embedded default's Celery broker: kombu's filesystem transport made safe for several processes.

kombu's own filesystem transport writes a message under its final name, so a worker polling the
folder can take and parse a file its writer has not finished (a ``JSONDecodeError`` that kills the
worker), and it forgets a message once taken: a worker killed before acknowledging it loses it.
This transport keeps kombu's folder layout and file names and changes three things:

* **put**: a message is written to a hidden temporary file in the queue's folder (a name no reader
  takes) and renamed into place, so a reader sees a message whole or not at all;
* **get**: a reader claims a message by renaming it into a folder of its own (``claims/<owner>/``);
  a rename succeeds for one reader only, so two workers never take the same message. A file that
  still cannot be read (written by something else, a full disk) is moved to ``quarantine/`` with a
  log line, and the worker goes on;
* **ack**: the claimed file is deleted when the message is acknowledged (or rejected, or restored
  to the queue by kombu at a clean shutdown). The claims of a process that died (its lock on
  ``claims/<owner>.lock`` is gone: the kernel drops it even on SIGKILL) are put back in the queue,
  marked ``redelivered``, by the next reader that looks. That is the Redis transport's promise
  (a message not acknowledged is delivered again), with the death of the owner instead of a
  visibility timeout: at least once, and a second delivery says so.

Production uses Redis (``REDIS_URL``); this is only the embedded default's transport.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

# How often a reader looks for the claims of dead processes (and at its first read).
RECOVER_SECONDS = 2.0


def _is_message_of(name: str, queue: str) -> bool:
    # kombu's names: ``<ms>_<uuid>.<queue>.msg``; temporary files start with a dot and end in .tmp.
    return not name.startswith(".") and name.partition(".")[2] == f"{queue}.msg"


class _Owner:
    """This process's claims folder and the lock that says it is alive (one per process)."""

    def __init__(self, claims: Path) -> None:
        self.pid = os.getpid()
        self.name = f"{self.pid}-{uuid.uuid4().hex[:12]}"
        self.folder = claims / self.name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock_path = claims / f"{self.name}.lock"
        # A POSIX record lock belongs to this process alone: a forked child does not hold it, and it
        # is released when the process ends, however it ends. The file is locked before it gets the
        # name the recovery looks for, so no reader ever finds it unlocked while its owner lives.
        locking = claims / f".{self.name}.locking"
        self.lock_fd = os.open(locking, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.lockf(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(locking, self.lock_path)


_owners: dict[tuple[int, str], _Owner] = {}


def _owner(claims: Path) -> _Owner:
    key = (os.getpid(), str(claims))
    owner = _owners.get(key)
    if owner is None:
        owner = _owners[key] = _Owner(claims)
    return owner


def _write_atomically(folder: str, name: str, payload: dict[str, Any]) -> None:
    temporary = os.path.join(folder, f".{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb", buffering=0) as f:
            f.write(str_to_bytes(dumps(payload)))
        os.replace(temporary, os.path.join(folder, name))
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise filesystem.ChannelError(f"Cannot add message {name!r} to {folder!r}") from exc


def _mark_redelivered(payload: dict[str, Any]) -> dict[str, Any]:
    """Celery reads ``properties.delivery_info.redelivered`` (kombu's own restore sets only the top level)."""
    payload["redelivered"] = True
    properties = payload.setdefault("properties", {})
    properties.setdefault("delivery_info", {})["redelivered"] = True
    return payload


class Channel(filesystem.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claims: dict[str, str] = {}
        self._recovered_at = 0.0

    @property
    def claims_folder(self) -> Path:
        return Path(self.transport_options.get("claims_folder", "claims"))

    @property
    def quarantine_folder(self) -> Path:
        return Path(self.transport_options.get("quarantine_folder", "quarantine"))

    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        _write_atomically(self.data_folder_out, name, payload)

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        now = time.monotonic()
        if now - self._recovered_at >= RECOVER_SECONDS:
            self._recovered_at = now
            self.recover_dead_claims()
        owner = _owner(self.claims_folder)
        for name in sorted(os.listdir(self.data_folder_in)):
            if not _is_message_of(name, queue):
                continue
            claimed = owner.folder / name
            try:
                # The claim: one rename, which only one reader can win.
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another reader claimed it first
            try:
                payload = loads(bytes_to_str(claimed.read_bytes()))
                tag = payload["properties"]["delivery_tag"]
            except (OSError, ValueError, KeyError, TypeError):
                self._quarantine(claimed)
                continue
            self._claims[tag] = str(claimed)
            return payload  # type: ignore[no-any-return]
        raise virtual.Empty()

    def _quarantine(self, path: Path) -> None:
        self.quarantine_folder.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_folder / path.name
        try:
            os.replace(path, target)
        except OSError:
            logger.exception("The broker could not set aside the unreadable message %s", path.name)
            return
        logger.error("The broker set aside an unreadable message (not delivered): %s", target)

    def _forget_claim(self, delivery_tag: str) -> None:
        path = self._claims.pop(delivery_tag, None)
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple=multiple)
        self._forget_claim(delivery_tag)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # With requeue, kombu puts the message back (``_restore``) before this forgets the claim.
        super().basic_reject(delivery_tag, requeue=requeue)
        self._forget_claim(delivery_tag)

    def _restore(self, message: Any) -> None:
        """Back in the queue (written first, then the claim forgotten: a crash between is a redelivery, not a loss)."""
        delivery_info = message.delivery_info
        payload = _mark_redelivered(message.serializable())
        for queue in self._lookup(delivery_info["exchange"], delivery_info["routing_key"]):
            self._put(queue, payload)
        self._forget_claim(message.delivery_tag)

    def recover_dead_claims(self) -> int:
        """Put the claims of processes that died back in their queue, marked redelivered; how many."""
        claims = self.claims_folder
        if not claims.is_dir():
            return 0
        mine = _owners.get((os.getpid(), str(claims)))
        restored = 0
        for lock_path in claims.glob("*.lock"):
            if mine is not None and lock_path == mine.lock_path:
                continue
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # recovered by another reader meanwhile
            try:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its owner is alive
                restored += self._restore_folder(claims / lock_path.stem)
                lock_path.unlink(missing_ok=True)
            finally:
                os.close(fd)
        if restored:
            logger.warning("The broker put back %d message(s) taken by a worker that died before finishing them", restored)
        return restored

    def _restore_folder(self, folder: Path) -> int:
        restored = 0
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                try:
                    payload = json.loads(path.read_bytes())
                except FileNotFoundError:
                    continue
                except (OSError, ValueError):
                    self._quarantine(path)
                    continue
                # Back under its own name: it keeps its place in the queue's order.
                _write_atomically(self.data_folder_in, path.name, _mark_redelivered(payload))
                path.unlink(missing_ok=True)
                restored += 1
            try:
                folder.rmdir()
            except OSError:
                pass
        return restored


_states: dict[str, virtual.BrokerState] = {}


class Transport(filesystem.Transport):
    Channel = Channel
    driver_type = "filesystem"
    driver_name = "ramfs"
    # A folder has no host: without this kombu warns "No hostname was supplied" in every process.
    default_connection_params = {"port": 0, "hostname": ""}

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # kombu keeps one state (which exchanges and bindings were declared) per process; it is per
        # folder here, so a binding declared for one folder is written to another's too.
        control = str(client.transport_options.get("control_folder", "control"))
        self.state = _states.setdefault(control, virtual.BrokerState())
