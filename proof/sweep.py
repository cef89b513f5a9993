"""The secrets sweep, after every other experiment: each secret the proof planted (passwords, TOTP
seeds, invites, tickets, API and executor keys, the server's own keys) is looked for in every log
line, every row of every table of the proof's PostgreSQL (events included), every Redis key (Celery
messages decoded from their base64 bodies, the channel layer's messages) and every file under the
proof's ``var/`` (artifacts, browser profiles, OpenBao's storage).

A secret is looked for as written, URL-encoded, JSON-escaped and in UTF-16 (Chromium's own files).
The only places a secret may be are the ones that hold it by design, each checked to be ``0600``:
the embedded OpenBao's init and role-token files and the local webhook key (``var/``). The report
never prints a secret: it names the place and the secret's number.
"""

from __future__ import annotations

import base64
import json
import secrets as secrets_module
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

import requests

from proof.core import Profile, Row, Stack
from proof.load import api, idempotency_key, run_create, wait_status

# Files under var/ that hold a server secret by design (0600): OpenBao's unseal key and root token,
# the role tokens the embedded default hands to the web and executor processes, the webhook key.
DESIGNED_KEEPERS = ("openbao/init.json", "openbao/roles.json", "webhook_key")
CHUNK = 8 * 1024 * 1024


def forms(secret: str) -> list[bytes]:
    """How a secret could appear in a file, a row or a message."""
    found = {
        secret.encode(),
        quote(secret, safe="").encode(),
        quote_plus(secret).encode(),
        json.dumps(secret)[1:-1].encode(),
        secret.encode("utf-16-le"),
    }
    return sorted(found)


@dataclass
class Findings:
    secrets: list[str]
    needles: list[list[bytes]] = field(default_factory=list)
    hits: dict[int, list[str]] = field(default_factory=dict)
    places: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.needles = [forms(s) for s in self.secrets]

    def look(self, place: str, data: bytes) -> None:
        for index, needles in enumerate(self.needles):
            if any(n in data for n in needles):
                self.hits.setdefault(index, [])
                if place not in self.hits[index]:
                    self.hits[index].append(place)

    def counted(self, kind: str, n: int = 1) -> None:
        self.places[kind] = self.places.get(kind, 0) + n


def _chunks(path: Path, overlap: int) -> Iterator[bytes]:
    """A file in overlapping chunks (a secret across a chunk boundary is still found)."""
    with open(path, "rb") as handle:
        tail = b""
        while chunk := handle.read(CHUNK):
            yield tail + chunk
            tail = chunk[-overlap:]


def sweep_logs(stack: Stack, findings: Findings) -> None:
    overlap = max((len(n) for needles in findings.needles for n in needles), default=64)
    logs = set(stack.log_paths)
    root = getattr(stack, "root", None)
    if root is not None and (Path(root) / "logs").is_dir():
        logs |= set((Path(root) / "logs").glob("*"))
    for path in sorted(logs):
        if path.is_file():
            findings.counted("log files")
            for chunk in _chunks(path, overlap):
                findings.look(f"log {path.name}", chunk)


def sweep_database(stack: Stack, findings: Findings) -> None:
    """Every table of every schema of the proof's database, dumped with COPY."""
    import psycopg
    from psycopg import sql

    url = stack.database_url.replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            findings.counted("tables")
            query = sql.SQL("COPY (SELECT * FROM {}.{}) TO STDOUT").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            dump = bytearray()
            with connection.cursor().copy(query) as copy:
                for data in copy:
                    dump += bytes(data)
            findings.counted("table bytes", len(dump))
            # COPY escapes backslashes; look at the rows as stored and as escaped.
            findings.look(f"table {table}", bytes(dump))
            findings.look(f"table {table}", bytes(dump).replace(b"\\\\", b"\\"))


def _kombu_bodies(value: bytes) -> Iterator[bytes]:
    """A Celery message's body, which kombu keeps base64-encoded inside its JSON envelope."""
    try:
        message = json.loads(value)
    except ValueError:
        return
    if isinstance(message, dict) and isinstance(message.get("body"), str):
        properties = message.get("properties") or {}
        if properties.get("body_encoding") == "base64":
            try:
                yield base64.b64decode(message["body"])
            except ValueError:
                return


def sweep_redis(stack: Stack, findings: Findings) -> None:
    """Every key of every database of the proof's Redis: Celery's queues and results, the channel layer."""
    import redis

    base: Any = redis.Redis.from_url(stack.redis_url)
    keyspace = base.info("keyspace")
    for name in keyspace:
        client: Any = redis.Redis.from_url(stack.redis_url, db=int(str(name).removeprefix("db")))
        for key in client.scan_iter(count=500):
            findings.counted("redis keys")
            kind = client.type(key).decode()
            values: list[bytes] = [key]
            if kind == "string":
                values.append(client.get(key) or b"")
            elif kind == "list":
                values += client.lrange(key, 0, -1)
            elif kind == "hash":
                for field_, value in client.hgetall(key).items():
                    values += [field_, value]
            elif kind == "set":
                values += list(client.smembers(key))
            elif kind == "zset":
                values += [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
            elif kind == "stream":
                for _id, entry in client.xrange(key):
                    for field_, value in entry.items():
                        values += [field_, value]
            for value in values:
                findings.look(f"redis {kind}", value)
                for body in _kombu_bodies(value):
                    findings.look("redis celery message", body)


def sweep_files(stack: Stack, findings: Findings) -> tuple[list[str], list[str]]:
    """Every file under var/; the designed keepers are read too, and must be 0600."""
    overlap = max((len(n) for needles in findings.needles for n in needles), default=64)
    keepers, loose = [], []
    var = Path(stack.var_dir)
    for path in sorted(var.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(var).as_posix()
        findings.counted("files under var/")
        try:
            findings.counted("var/ bytes", path.stat().st_size)
            if relative in DESIGNED_KEEPERS:
                keepers.append(relative)
                if stat.S_IMODE(path.stat().st_mode) & 0o077:
                    loose.append(relative)
                continue
            for chunk in _chunks(path, overlap):
                findings.look(f"file var/{relative}", chunk)
        except OSError:
            continue  # a file that went away while the sweep ran (a browser's cache, a socket)
    return keepers, loose


def credential_flow(stack: Stack) -> str:
    """Plant the secrets a person hands over: a run asks for the portal's credential, the person opens
    the Vault form (its invite) and saves a username, a password and a TOTP seed, the run continues and
    ``browser_login`` types them into the portal. The run's final status."""
    portal = getattr(stack, "portal", None)
    username = getattr(portal, "username", "proof.user@example.com")
    password = getattr(portal, "password", None) or "Pw-" + secrets_module.token_urlsafe(18)
    totp = base64.b32encode(secrets_module.token_bytes(20)).decode()
    for secret in (password, totp):
        stack.plant(secret)
    credential_id = "proof-portal-" + secrets_module.token_hex(4)
    steps = [
        {
            "tool": "request_credential",
            "arguments": {"portal_origin": stack.portal_url, "label": "Proof portal", "credential_id": credential_id},
        },
        {"tool": "navigate", "arguments": {"url": f"{stack.portal_url}/login"}},
        {"tool": "browser_login", "arguments": {"credentialId": credential_id}},
        {"tool": "finish", "arguments": {}},
    ]
    run_id = run_create(stack, stack.computers[0], steps, goal="proof: a credential through the Vault form")
    if wait_status(stack, run_id, {"waiting_for_input"}, 180) != "waiting_for_input":
        raise RuntimeError("the credential request did not pause the run")
    person = stack.sign_in_person()
    origin = stack.web_urls[0]
    page = person.get(f"{origin}/tasks/{run_id}/intervention", timeout=30)
    page.raise_for_status()
    csrf = person.cookies.get("csrftoken") or ""
    opened = person.post(
        f"{origin}/tasks/{run_id}/intervention/open",
        data={"intent": "open", "csrfmiddlewaretoken": csrf},
        headers={"Origin": origin, "Referer": f"{origin}/tasks/{run_id}/intervention"},
        allow_redirects=False,
        timeout=30,
    )
    location = opened.headers.get("Location", "")
    invite = parse_qs(urlsplit(location).fragment).get("invite", [""])[0]
    if opened.status_code != 303 or not invite:
        raise RuntimeError(f"opening the intervention answered {opened.status_code}")
    stack.plant(invite)
    saved = person.post(
        f"{origin}/tasks/{run_id}/credential",
        data=json.dumps({"username": username, "password": password, "totp_secret": totp}),
        headers={
            "Content-Type": "application/json",
            "Origin": origin,
            "Referer": f"{origin}/tasks/{run_id}/credential",
            "X-CSRFToken": csrf,
            "X-RAM-Invite": invite,
        },
        timeout=30,
    )
    if saved.status_code != 200:
        raise RuntimeError(f"saving the credential answered {saved.status_code}")
    continued = api(stack, "POST", f"/api/runs/{run_id}/continue", json={"idempotency_key": idempotency_key()})
    if continued.status_code != 201:
        raise RuntimeError(f"continuing answered {continued.status_code}")
    return wait_status(stack, str(continued.json()["run"]["id"]), set(), 240)


def secrets_sweep(stack: Stack, profile: Profile) -> list[Row]:
    try:
        status = credential_flow(stack)
        flow, flow_held = f"a Vault form and browser_login run first ({status})", int(status == "succeeded")
    except (RuntimeError, requests.RequestException, KeyError, ValueError) as exc:
        flow, flow_held = f"the Vault form flow failed: {str(exc)[:80]}", 0
    secrets = [s for s in stack.planted_secrets if len(s) >= 8]
    findings = Findings(secrets)
    sweep_logs(stack, findings)
    sweep_database(stack, findings)
    sweep_redis(stack, findings)
    keepers, loose = sweep_files(stack, findings)
    leaks = sum(len(places) for places in findings.hits.values())
    where = "; ".join(f"secret #{i + 1} in {', '.join(places[:3])}" for i, places in sorted(findings.hits.items()))
    p = findings.places
    figure = (
        f"{len(secrets)} secrets in {p.get('log files', 0)} logs, {p.get('tables', 0)} tables "
        f"({p.get('table bytes', 0) / 1e6:.1f} MB), {p.get('redis keys', 0)} Redis keys, "
        f"{p.get('files under var/', 0)} files under var/ ({p.get('var/ bytes', 0) / 1e6:.0f} MB): "
        + (f"FOUND {where}" if where else "found nowhere")
        + f"; {flow}"
        + (
            f"; designed keepers {', '.join(keepers)} " + ("0600" if not loose else f"NOT 0600: {', '.join(loose)}")
            if keepers
            else ""
        )
    )
    return [
        Row(
            experiment="secrets sweep",
            tries=len(secrets) + len(keepers) + 1,
            held=len(secrets) - len(findings.hits) + len(keepers) - len(loose) + flow_held,
            lost=leaks,
            duplicated=0,
            figure=figure,
        )
    ]
