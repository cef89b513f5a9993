"""Production-like settings pass Django's deployment checks; the embedded default needs no environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each test runs manage.py in a subprocess.
pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "VAULT_", "RAM_", "DJANGO_"))}
    env.update(extra)
    return env


def test_check_deploy_passes_with_production_values(tmp_path: Path) -> None:
    env = _clean_env(
        SECRET_KEY="x" * 20 + "-production-secret-key-with-enough-entropy-0123456789",
        DEBUG="false",
        ALLOWED_HOSTS="ram.example.com",
        RAM_PUBLIC_ORIGIN="https://ram.example.com",
        SECURE_SSL_REDIRECT="true",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/ram",
        REDIS_URL="redis://127.0.0.1:6379/0",
        VAULT_ADDR="https://vault.example.com",
        VAULT_TOKEN="unused-in-check",
        RAM_VAR_DIR=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_deploy_fails_with_debug_on(tmp_path: Path) -> None:
    env = _clean_env(
        SECRET_KEY="x" * 60, DEBUG="true", RAM_PUBLIC_ORIGIN="https://ram.example.com", RAM_VAR_DIR=str(tmp_path)
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "DEBUG" in result.stderr + result.stdout
