"""Chromium with its sandbox, as an unprivileged user, wherever the host allows it.

Chromium refuses its sandbox when it runs as root (the case on many servers and
containers). So an executor started as root runs Playwright's driver — and with
it Chromium and the files they create (profile, downloads) — as a dedicated
unprivileged user: ``RAM_BROWSER_USER`` (default ``ram-browser``), created as a
system user without a login shell when it does not exist. An executor started
as any other user keeps that user. ``--no-sandbox`` is used only when
``RAM_CHROMIUM_NO_SANDBOX`` is true, and the executor then warns at start.

The switch happens through Playwright's ``PLAYWRIGHT_NODEJS_PATH``: a small
wrapper runs the driver's Node.js with ``setpriv`` as that user (no new
privileges, no supplementary groups). It is set for the executor process only
(``run_executor``), never for a process that runs other browsers.
"""

from __future__ import annotations

import logging
import os
import pwd
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


class SandboxUnavailable(Exception):
    """The browser cannot get a sandbox as configured; the message says what to configure."""


@dataclass(frozen=True)
class BrowserIdentity:
    """How the executor's browser runs: with its sandbox or not, and as whom."""

    sandbox: bool
    user: str

    def describe(self) -> str:
        return f"Chromium {'with' if self.sandbox else 'WITHOUT'} its sandbox, as {self.user}"


def _ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise SandboxUnavailable(
            f"The browser user {name!r} does not exist and cannot be created here; create it, or set "
            "RAM_BROWSER_USER to an existing unprivileged user."
        )
    subprocess.run(  # noqa: S603 - fixed argv, a validated name
        [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
        timeout=30,
    )
    logger.info("created the unprivileged browser user %s", name)
    return pwd.getpwnam(name)


def _driver_node() -> str:
    from playwright._impl._driver import compute_driver_executable

    node = compute_driver_executable()[0]
    return str(node)


def prepare_browser_identity() -> BrowserIdentity:
    """Decide how this executor process runs Chromium, switching the driver's user when root.

    Call once, in the executor process, before Playwright starts.
    """
    if settings.RAM_CHROMIUM_NO_SANDBOX:
        logger.warning(NO_SANDBOX_WARNING)
        return BrowserIdentity(sandbox=False, user=pwd.getpwuid(os.geteuid()).pw_name)
    if os.geteuid() != 0:
        return BrowserIdentity(sandbox=True, user=pwd.getpwuid(os.geteuid()).pw_name)
    name = settings.RAM_BROWSER_USER
    if not name or name == "root" or not name.replace("-", "").replace("_", "").isalnum():
        raise SandboxUnavailable("RAM_BROWSER_USER must name an unprivileged user (not root).")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxUnavailable(
            "setpriv (util-linux) is needed to run the browser as an unprivileged user; install it, or set "
            "RAM_CHROMIUM_NO_SANDBOX=true to run Chromium without its sandbox."
        )
    user = _ensure_user(name)
    if user.pw_uid == 0:
        raise SandboxUnavailable("RAM_BROWSER_USER must name an unprivileged user (not root).")
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
    return BrowserIdentity(sandbox=True, user=name)
