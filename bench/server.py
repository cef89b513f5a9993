"""``python -m bench.server PORT [--no-ping] [--deflate]``: the gateway with the
production uvicorn flags (Ping can be turned off to keep a stalled viewer
connected; ``--deflate`` turns permessage-deflate back on, only to measure what
turning it off saves)."""

from __future__ import annotations

import os
import sys

import uvicorn


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")
    import django

    django.setup()  # run_embedded's module imports models
    port = int(sys.argv[1])
    import django

    django.setup()  # run_embedded imports models
    from ramsite.management.commands.run_embedded import uvicorn_options

    options = {**uvicorn_options(), "log_level": "warning", "access_log": False}
    if "--no-ping" in sys.argv:
        options["ws_ping_interval"] = None
    if "--deflate" in sys.argv:
        options["ws_per_message_deflate"] = True
    uvicorn.run("ramsite.asgi:application", host="127.0.0.1", port=port, **options)


if __name__ == "__main__":
    main()
