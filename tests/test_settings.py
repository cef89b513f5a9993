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


WEBHOOK_KEY = "kQ3nUq0wW8xR2bY7cF1mJ5tA9sD4gH6eL0pZ3vN8uIo="
PROFILE_KEY = "pR0f1lEk3yExAmpLe-nEvEr-uSe-tH1s-0123456789="


def _production(tmp_path: Path, **overrides: str | None) -> dict[str, str]:
    """A production environment (``None`` leaves a variable out)."""
    values: dict[str, str | None] = {
        "SECRET_KEY": "x" * 20 + "-production-secret-key-with-enough-entropy-0123456789",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "ram.example.com",
        "RAM_PUBLIC_ORIGIN": "https://ram.example.com",
        "SECURE_SSL_REDIRECT": "true",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/ram",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "VAULT_ADDR": "https://vault.example.com",
        "VAULT_TOKEN": "unused-in-check",
        "RAM_WEBHOOK_SECRET_KEYS": WEBHOOK_KEY,
        "RAM_PROFILE_STORE_KEYS": PROFILE_KEY,
        "RAM_VAR_DIR": str(tmp_path),
        **overrides,
    }
    return _clean_env(**{name: value for name, value in values.items() if value is not None})


def _deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_passes_with_production_values(tmp_path: Path) -> None:
    result = _deploy_check(_production(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("keys", "expected"), [(None, "ram.W010"), ("not-a-fernet-key", "ram.E010"), (f"{WEBHOOK_KEY},short", "ram.E010")]
)
def test_check_deploy_wants_shared_valid_webhook_secret_keys(tmp_path: Path, keys: str | None, expected: str) -> None:
    result = _deploy_check(_production(tmp_path, RAM_WEBHOOK_SECRET_KEYS=keys))
    assert result.returncode != 0 and expected in result.stdout + result.stderr


@pytest.mark.parametrize(("keys", "expected"), [(None, "ram.W011"), ("short", "ram.E011"), (f"{PROFILE_KEY},c2hvcnQ=", "ram.E011")])
def test_check_deploy_wants_shared_valid_profile_store_keys(tmp_path: Path, keys: str | None, expected: str) -> None:
    result = _deploy_check(_production(tmp_path, RAM_PROFILE_STORE_KEYS=keys))
    assert result.returncode != 0 and expected in result.stdout + result.stderr


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


def _check_deploy(tmp_path: Path, origin: str) -> subprocess.CompletedProcess[str]:
    env = _clean_env(
        SECRET_KEY="x" * 20 + "-production-secret-key-with-enough-entropy-0123456789",
        DEBUG="false",
        ALLOWED_HOSTS="ram.example.com",
        RAM_PUBLIC_ORIGIN=origin,
        RAM_VAR_DIR=str(tmp_path),
    )
    # The default fail level: only errors fail the command.
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_fails_with_an_error_for_an_http_origin_off_loopback(tmp_path: Path) -> None:
    for origin in ("http://ram.example.com", "http://10.0.0.5:8000", "ftp://ram.example.com"):
        result = _check_deploy(tmp_path, origin)
        assert result.returncode != 0, origin
        assert "ERRORS" in result.stderr and "ram.E001" in result.stderr, result.stderr


def test_check_deploy_accepts_https_and_loopback_http_origins(tmp_path: Path) -> None:
    for origin in ("https://ram.example.com", "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"):
        result = _check_deploy(tmp_path, origin)
        assert result.returncode == 0, (origin, result.stderr)
        assert "ram.E001" not in result.stdout + result.stderr


def _artifact_storage(tmp_path: Path, **values: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import django; django.setup(); from django.core.files.storage import storages; s = storages['artifacts']; "
        "print(type(s).__name__, getattr(s, 'bucket_name', s.location), getattr(s, 'endpoint_url', ''), "
        "getattr(s, 'location', ''), getattr(s, 'default_acl', None), getattr(s, 'file_overwrite', None))"
    )
    env = _clean_env(DJANGO_SETTINGS_MODULE="ramsite.settings", RAM_VAR_DIR=str(tmp_path), **values)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_artifacts_are_files_under_var_by_default_and_in_a_private_s3_bucket_when_configured(tmp_path: Path) -> None:
    embedded = _artifact_storage(tmp_path)
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout.split()[:2] == ["FileSystemStorage", str(tmp_path / "artifacts")]
    s3 = _artifact_storage(
        tmp_path,
        RAM_ARTIFACT_STORAGE="s3",
        RAM_ARTIFACT_S3_BUCKET="ram-artifacts",
        RAM_ARTIFACT_S3_ENDPOINT_URL="https://s3.internal:9000",
    )
    assert s3.returncode == 0, s3.stderr
    assert s3.stdout.split() == ["S3Storage", "ram-artifacts", "https://s3.internal:9000", "artifacts", "None", "False"]
    refused = _artifact_storage(tmp_path, RAM_ARTIFACT_STORAGE="ftp")
    assert refused.returncode != 0 and "RAM_ARTIFACT_STORAGE must be file or s3" in refused.stderr


def _cookies(tmp_path: Path, origin: str, **values: str) -> list[str]:
    """The session and CSRF cookie settings, and the Set-Cookie header Django's CSRF middleware sends."""
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "from django.middleware.csrf import CsrfViewMiddleware, get_token; "
        "from django.http import HttpResponse; from django.test import RequestFactory; "
        "request = RequestFactory().get('/', secure=True); "
        "response = CsrfViewMiddleware(lambda r: (get_token(r), HttpResponse())[1])(request); "
        "print(s.SESSION_COOKIE_NAME, s.SESSION_COOKIE_SECURE, s.SESSION_COOKIE_PATH, s.SESSION_COOKIE_DOMAIN); "
        "print(response.cookies[s.CSRF_COOKIE_NAME].output())"
    )
    env = _clean_env(DJANGO_SETTINGS_MODULE="ramsite.settings", RAM_VAR_DIR=str(tmp_path), RAM_PUBLIC_ORIGIN=origin, **values)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_under_an_https_origin_the_session_and_csrf_cookies_are_host_prefixed(tmp_path: Path) -> None:
    """``__Host-``: a browser takes the cookie only Secure, from https on this host, Path=/, no Domain,
    so neither an http page nor a sibling subdomain can plant a session or a CSRF token."""
    session, csrf = _cookies(tmp_path, "https://ram.example.com", SESSION_COOKIE_SECURE="false", CSRF_COOKIE_SECURE="false")
    assert session == "__Host-sessionid True / None"
    assert csrf.startswith("Set-Cookie: __Host-csrftoken="), csrf
    attributes = [a.strip().lower() for a in csrf.split(";")[1:]]
    assert "secure" in attributes and "path=/" in attributes
    assert not any(a.startswith("domain") for a in attributes), csrf


def test_under_an_http_origin_the_cookies_keep_their_plain_names(tmp_path: Path) -> None:
    session, csrf = _cookies(tmp_path, "http://127.0.0.1:8000")
    assert session == "sessionid False / None"
    assert csrf.startswith("Set-Cookie: csrftoken=") and "secure" not in csrf.lower(), csrf


@pytest.mark.parametrize("variable", ["RAM_VIEW_FRAME_ANCESTORS", "RAM_VISUAL_TICKET_ORIGINS"])
@pytest.mark.parametrize("value", ["null", "https://*.example.com", "https://app.example.com/path", "app.example.com"])
def test_origin_lists_take_exact_origins_only(tmp_path: Path, variable: str, value: str) -> None:
    env = _clean_env(RAM_VAR_DIR=str(tmp_path), **{variable: value})
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "not an exact origin" in result.stderr, result.stderr[-500:]
