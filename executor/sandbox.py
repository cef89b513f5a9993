"""Chromium with its sandbox, as an unprivileged user, wherever the host allows it.

Chromium refuses its sandbox when it runs as root (the case on many servers and
containers). So an executor started as root runs Playwright's driver — and with
it Chromium and the files they create (profile, downloads) — as an unprivileged
user of that computer's own: ``<RAM_BROWSER_USER_PREFIX><16 hex digits of the
SHA-256 of the computer id>`` (``ram-c-…`` by default), created as a system user
without a home or a login shell when it does not exist. Two computers on one host
never share a user, so a browser compromised on one cannot read another's profile
(each ``0700``, owned by its own user). An executor started as any other user keeps
that user. ``--no-sandbox`` is used only when
``RAM_CHROMIUM_NO_SANDBOX`` is true, and the executor then warns at start.

The switch happens through Playwright's ``PLAYWRIGHT_NODEJS_PATH``: a small
wrapper runs the driver's Node.js with ``setpriv`` as that user (no new
privileges, no supplementary groups). It is set for the executor process only
(``run_executor``), never for a process that runs other browsers.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

NO_SANDBOX_WARNING = (
    "RAM_CHROMIUM_NO_SANDBOX is true: the computer's Chromium runs WITHOUT its sandbox. A page that "
    "exploits the browser runs with the executor's rights. Use it only where the host cannot give "
    "Chromium a sandbox, and isolate the executor another way."
)


# A portable user name (useradd's own rule, at most 32 characters with the 16-digit suffix).
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,15}[0-9a-f]{16}")


class SandboxUnavailable(Exception):
    """The browser cannot get a sandbox as configured; the message says what to configure."""


@dataclass(frozen=True)
class BrowserIdentity:
    """How the executor's browser runs: with its sandbox or not, and as whom."""

    sandbox: bool
    user: str

    def describe(self) -> str:
        return f"Chromium {'with' if self.sandbox else 'WITHOUT'} its sandbox, as {self.user}"


def browser_user_name(computer_id: str) -> str:
    """The computer's own browser user: the prefix and 16 hex digits of its id's SHA-256."""
    digest = hashlib.sha256(computer_id.encode("utf-8")).hexdigest()[:16]
    return f"{settings.RAM_BROWSER_USER_PREFIX}{digest}"


def _ensure_user(name: str) -> pwd.struct_passwd:
    if not _USER_NAME.fullmatch(name):
        raise SandboxUnavailable(
            "RAM_BROWSER_USER_PREFIX must be a short user-name prefix (lower-case letters, digits, '-' or '_', "
            "starting with a letter)."
        )
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise SandboxUnavailable(
            f"The browser user {name!r} does not exist and cannot be created here (no useradd); create it "
            "as an unprivileged system user, or run the executor as an unprivileged user."
        )
    created = subprocess.run(  # noqa: S603 - fixed argv, a validated name
        [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
        check=False,
        capture_output=True,
        timeout=30,
    )
    try:
        entry = pwd.getpwnam(name)  # another executor may have created it meanwhile
    except KeyError:
        raise SandboxUnavailable(
            f"The browser user {name!r} could not be created: {created.stderr.decode(errors='replace').strip()}"
        ) from None
    if created.returncode == 0:
        logger.info("created the unprivileged browser user %s", name)
    return entry


def browser_user_ensure(computer_id: str) -> pwd.struct_passwd:
    """The computer's own unprivileged browser user, created when missing (needs root)."""
    entry = _ensure_user(browser_user_name(computer_id))
    if entry.pw_uid == 0:
        raise SandboxUnavailable(f"The browser user {entry.pw_name!r} must be unprivileged (not root).")
    return entry


def _driver_node() -> str:
    # Playwright's private driver module, read only where a computer's browser user is prepared.
    from playwright._impl._driver import compute_driver_executable  # noqa: PLC0415

    node = compute_driver_executable()[0]
    return str(node)


def prepare_browser_identity(computer_id: str) -> BrowserIdentity:
    """Decide how this executor process runs the computer's Chromium, switching the driver's user
    to the computer's own when root.

    Call once, in the executor process, before Playwright starts.
    """
    if settings.RAM_CHROMIUM_NO_SANDBOX:
        logger.warning(NO_SANDBOX_WARNING)
        return BrowserIdentity(sandbox=False, user=pwd.getpwuid(os.geteuid()).pw_name)
    if os.geteuid() != 0:
        return BrowserIdentity(sandbox=True, user=pwd.getpwuid(os.geteuid()).pw_name)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxUnavailable(
            "setpriv (util-linux) is needed to run the browser as an unprivileged user; install it, or set "
            "RAM_CHROMIUM_NO_SANDBOX=true to run Chromium without its sandbox."
        )
    user = browser_user_ensure(computer_id)
    home = Path(tempfile.mkdtemp(prefix="ram-browser-home-"))
    os.chown(home, user.pw_uid, user.pw_gid)
    wrapper_dir = Path(tempfile.mkdtemp(prefix="ram-browser-driver-"))
    wrapper = wrapper_dir / "node"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"HOME='{home}'; export HOME\n"
        f"exec '{setpriv}' --reuid={user.pw_uid} --regid={user.pw_gid} --clear-groups --no-new-privs "
        f"-- '{_driver_node()}' \"$@\"\n"
    )
    wrapper_dir.chmod(0o755)
    wrapper.chmod(0o755)
    os.environ["PLAYWRIGHT_NODEJS_PATH"] = str(wrapper)
    return BrowserIdentity(sandbox=True, user=user.pw_name)
