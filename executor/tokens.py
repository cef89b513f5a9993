"""The executor's internal token: ``RAM_EXECUTOR_TOKEN`` or, in the embedded
default, a random token kept ``0600`` under ``var/`` and shared by the
processes of this one machine."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings


def executor_token() -> str:
    if settings.RAM_EXECUTOR_TOKEN:
        return str(settings.RAM_EXECUTOR_TOKEN)
    path = Path(settings.VAR_DIR) / "executor.token"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32))
    return path.read_text().strip()
