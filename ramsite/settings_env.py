"""What every settings module reads first: the checkout, the one django-environ ``env`` (with
``.env`` read once, never overriding the environment) and ``var/``."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("RAM_VAR_DIR", default=str(BASE_DIR / "var")))
