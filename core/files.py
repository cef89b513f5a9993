"""Owner-only files for local state (the embedded default keeps them under ``var/``)."""

import base64
import os
import secrets
from pathlib import Path


def write_private(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` readable only by its owner (0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def local_secret_key(var_dir: Path) -> str:
    """The embedded default's SECRET_KEY: generated once, kept 0600 in var/."""
    path = var_dir / "secret_key"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(50))
    return path.read_text().strip()


def make_private(var_dir: Path) -> None:
    """Take group and other permissions off everything under ``var_dir``.

    New files are private already (the embedded default runs with umask 077);
    this fixes files an earlier version created readable by others.
    """
    if not var_dir.exists():
        return
    for path in [var_dir, *var_dir.rglob("*")]:
        try:
            if path.is_symlink():
                continue
            mode = path.stat().st_mode & 0o7777
            if mode & 0o077:
                os.chmod(path, mode & ~0o077)
        except FileNotFoundError:  # a transport file consumed meanwhile
            continue


def local_webhook_key(var_dir: Path) -> str:
    """The embedded default's key for webhook secrets at rest (a Fernet key): generated once, kept 0600 in var/."""
    path = var_dir / "webhook_key"
    if not path.exists():
        write_private(path, base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
    return path.read_text().strip()


def local_profile_key(var_dir: Path) -> str:
    """The embedded default's key for stored browser profiles (32 url-safe base64 bytes): generated once, 0600 in var/."""
    path = var_dir / "profile_key"
    if not path.exists():
        write_private(path, base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
    return path.read_text().strip()
