"""Hostile input against the running stack: the REST API through its OpenAPI document (Schemathesis),
the MCP endpoint through its JSON-RPC and tool schemas, the screen gateway through random and
mutated WebSocket messages, and browser_login through hostile login pages (an agent probing the
filled values with selectors after the answer; a show-password toggle as the submit control).

What holds: no server error, no answer outside the documented schema, no HTML error page; every
invalid WebSocket message ends its session as ``spec/visual_stream.md`` says (an ``error`` then a
connection dropped without a Close frame, or the library's 1009 for an oversized message), none of
them reaches an executor (counted at the executors: ``ram_executor_inputs_total``), and no server
log line is a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET  # noqa: S405 - the proof reads the report its own Schemathesis run wrote
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from proof.core import Profile, Row, Stack
from proof.load import api, cancel_open_runs, idempotency_key, run_create, runs_cancelled_after
from proof.stack import ProofStack

ROOT = Path(__file__).resolve().parent.parent
MAX_SAFE_INTEGER = 9007199254740991
TRACEBACK = "Traceback (most recent call last)"


# --- logs: no traceback while hostile input arrives ------------------------------------------


def log_offsets(stack: Stack) -> dict[Path, int]:
    return {path: (path.stat().st_size if path.exists() else 0) for path in stack.log_paths}


def tracebacks_since(offsets: dict[Path, int]) -> dict[str, int]:
    """Tracebacks each log gained since ``offsets`` (files that appeared since then are read whole)."""
    found: dict[str, int] = {}
    for path in offsets:
        if not path.exists():
            continue
        with open(path, "rb") as log:
            log.seek(offsets.get(path, 0))
            text = log.read().decode("utf-8", "replace")
        if (n := text.count(TRACEBACK)) > 0:
            found[path.name] = n
    return found


def traceback_row(name: str, offsets: dict[Path, int]) -> Row:
    found = tracebacks_since(offsets)
    figure = ", ".join(f"{n} in {log}" for log, n in sorted(found.items())) or "none"
    return Row(
        experiment=f"{name}: server tracebacks",
        tries=len(offsets),
        held=len(offsets) - len(found),
        lost=0,
        duplicated=0,
        figure=f"{len(offsets)} logs read: {figure}",
    )


# --- 9: Schemathesis over /api/openapi.json -------------------------------------------------------

# Statuses a schema-valid request may still get for a reason the schema cannot express (the state
# of a run, a key's kind, a reused idempotency key): Schemathesis's default list, plus 422.
EXPECTED_STATUSES = "2xx,3xx,401,403,404,409,422,429"
# Left to their own tests: creating or editing a webhook endpoint (its deliveries would go to the
# address the fuzzer chose, off this machine), and a computer's browser, settings and profile (the
# fuzzer would point the proof's own computers at an outside browser service or proxy).
NOT_FUZZED = [
    "--exclude-name", "POST /api/webhooks",
    "--exclude-name", "PATCH /api/webhooks/{webhook_id}",
    "--exclude-path-regex", "^/api/computers/",
]  # fmt: skip
# The upload's bytes must be of their declared type (a PNG begins as a PNG), and its file name may hold
# no Unicode format, private-use or unassigned character: a JSON Schema cannot say either (415, 400).
# The upload's body is bytes of any type (``*/*``): Schemathesis sends a "negative" (empty) string
# body as JSON when it picks application/json, so the server rightly stores the two bytes ``""``;
# the upload's real refusals (empty body, bad names, sizes, types) are tests/runs/test_files.py's.
# A run's agent.browser.provider must be its computer's backend's (400 run.browser_provider_mismatch,
# as the managed-browsers contract says): the schema cannot know which computer has which backend.
CONFIG = """[checks.positive_data_acceptance]
expected-statuses = {expected}

[[operations]]
include-name = "POST /api/artifacts"
checks.positive_data_acceptance.expected-statuses = {upload}
checks.negative_data_rejection.expected-statuses = {upload_negative}

[[operations]]
include-name = "POST /api/runs"
checks.positive_data_acceptance.expected-statuses = {runs}
"""


def schemathesis_command() -> list[str] | None:
    """``st`` from this interpreter's environment (requirements-dev.txt), or RAM_PROOF_SCHEMATHESIS."""
    configured = os.environ.get("RAM_PROOF_SCHEMATHESIS")
    if configured:
        return [configured]
    beside = Path(sys.executable).parent / "st"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("st") or shutil.which("schemathesis")
    return [found] if found else None


@dataclass
class Fuzzed:
    cases: int = 0
    failed_cases: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


def _schemathesis_run(stack: Stack, url: str, key: str, profile: Profile, report: Path) -> Fuzzed:
    command = schemathesis_command()
    if command is None:
        raise RuntimeError("schemathesis is not installed")
    examples = 8 if profile.name == "short" else 100
    config = report / "schemathesis.toml"
    expected = EXPECTED_STATUSES.split(",")
    config.write_text(
        CONFIG.format(
            expected=json.dumps(expected), upload=json.dumps([*expected, "400", "415"]), runs=json.dumps([*expected, "400"]),
            upload_negative=json.dumps(["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "201"]),
        )
    )
    argv = [
        *command, "--no-color", "--config-file", str(config),
        "run", f"{url}/api/openapi.json",
        "--header", f"Authorization: Bearer {key}",
        "--header", "X-RAM-Intent: visual-session",
        "--checks", "all",
        "--max-examples", str(examples),
        "--phases", "examples,coverage,fuzzing,stateful",
        "--workers", "2",
        "--request-timeout", "40",
        "--seed", "21",
        "--suppress-health-check", "all",
        "--report", "junit", "--report-dir", str(report),
        *NOT_FUZZED,
    ]  # fmt: skip
    result = subprocess.run(  # noqa: S603 - the proof's own argv
        argv, cwd=report, capture_output=True, text=True, timeout=3600, check=False
    )
    (report / "output.txt").write_text(result.stdout + result.stderr)
    root = getattr(stack, "root", None)
    if root is not None:  # kept with the proof's logs (``--keep``): what failed, with a curl to replay it
        (Path(root) / "logs" / f"schemathesis-{key[:7]}.txt").write_text(result.stdout + result.stderr)
    return _read_junit(report)


def _read_junit(report: Path) -> Fuzzed:
    fuzzed = Fuzzed()
    for xml in report.glob("**/*.xml"):
        tree = ET.parse(xml)  # noqa: S314 - our own report
        for case in tree.iter("testcase"):
            fuzzed.cases += 1
            problems = [*case.iter("failure"), *case.iter("error")]
            fuzzed.failed_cases += 1 if problems else 0
            for failure in problems:
                text = (failure.get("message") or "") + "\n" + (failure.text or "")
                for kind in _failure_kinds(text):
                    fuzzed.failures[kind] += 1
                if len(fuzzed.examples) < 5:
                    fuzzed.examples.append(
                        f"{case.get('name')}: {text.strip().splitlines()[0][:160] if text.strip() else ''}"
                    )
    return fuzzed


def _failure_kinds(text: str) -> list[str]:
    kinds = []
    for marker, kind in (
        ("Server error", "server error"),
        ("Undocumented status code", "undocumented status"),
        ("Response violates schema", "response schema"),
        ("Undocumented Content-Type", "content type"),
        ("Missing Content-Type", "content type"),
        ("Malformed media type", "content type"),
        ("Schema-valid request rejected", "valid request refused"),
        ("Schema-violating request accepted", "invalid request accepted"),
        ("API accepts requests without authentication", "authentication"),
        ("Missing header", "headers"),
        ("Unsupported method", "method"),
        ("<html", "HTML page"),
        ("Network Error", "network error"),
        ("Connection", "network error"),
        ("Timeout", "timeout"),
    ):
        if marker in text:
            kinds.append(kind)
    return kinds or ["other"]


def schemathesis_rest(stack: Stack, profile: Profile) -> list[Row]:
    """Schemathesis with a runner key against one web process and an observer key against the other."""
    if schemathesis_command() is None:
        return [
            Row("schemathesis /api/openapi.json", 1, 0, 0, 0, "schemathesis is not installed (requirements-dev.txt)")
        ]
    _seed_for_links(stack)
    offsets = log_offsets(stack)
    rows = []
    with runs_cancelled_after(stack):
        rows = [_schemathesis_row(stack, profile, role, key, url) for role, key, url in (
            ("runner key", stack.runner_key, stack.web_urls[0]),
            ("task_observer key", stack.observer_key, stack.web_urls[-1]),
        )]  # fmt: skip
    rows.append(traceback_row("schemathesis", offsets))
    return rows


def _schemathesis_row(stack: Stack, profile: Profile, role: str, key: str, url: str) -> Row:
    report = Path(tempfile.mkdtemp(prefix="proof-schemathesis-"))
    try:
        fuzzed = _schemathesis_run(stack, url, key, profile, report)
    finally:
        shutil.rmtree(report, ignore_errors=True)
    figure = f"{fuzzed.cases} operations, checks all"
    figure += "; " + (", ".join(f"{n} {kind}" for kind, n in fuzzed.failures.most_common()) or "0 failures")
    if fuzzed.examples:
        figure += " — e.g. " + " | ".join(fuzzed.examples[:2])
    return Row(
        experiment=f"schemathesis REST ({role})",
        tries=max(1, fuzzed.cases),
        held=fuzzed.cases - fuzzed.failed_cases,
        lost=0,
        duplicated=0,
        figure=figure,
    )


def _seed_for_links(stack: Stack) -> None:
    """A paused run, so that the operations on a run have one to find besides what the fuzzer creates."""
    run_create(stack, stack.computers[0], [{"tool": "request_takeover", "arguments": {"reason": "captcha"}}])


# --- 9: MCP through its JSON-RPC and tool schemas ------------------------------------------------------


class SchemaValues:
    """Values from a JSON Schema (valid by construction, as far as this generator goes) and
    mutations of them that the schema refuses."""

    def __init__(self, seed: int, known: dict[str, list[Any]], portal: str) -> None:
        self.random = random.Random(seed)  # noqa: S311 - reproducible fuzzing, not cryptography
        self.known = known
        self.portal = portal

    def valid(self, schema: dict[str, Any], root: dict[str, Any], name: str = "", depth: int = 0) -> Any:
        r = self.random
        if "$ref" in schema:
            target = root
            for part in schema["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return self.valid(target, root, name, depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return r.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
                return self.valid(r.choice(options), root, name, depth + 1)
        if "allOf" in schema:
            return self.valid(schema["allOf"][0], root, name, depth + 1)
        kind = schema.get("type", "object")
        if isinstance(kind, list):
            kind = r.choice([k for k in kind if k != "null"] or kind)
        if name in self.known and self.known[name] and r.random() < 0.7:
            return r.choice(self.known[name])
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            low = int(schema["exclusiveMinimum"]) + 1 if "exclusiveMinimum" in schema else int(schema.get("minimum", 0))
            high = (
                int(schema["exclusiveMaximum"]) - 1
                if "exclusiveMaximum" in schema
                else int(schema.get("maximum", low + 1000))
            )
            return r.randint(low, max(low, high))
        if kind == "number":
            start = float(schema.get("minimum", 0))
            return start + r.random() * (float(schema.get("maximum", start + 1000)) - start)
        if kind == "boolean":
            return r.random() < 0.5
        if kind == "null":
            return None
        if kind == "array":
            items = schema.get("items", {})
            count = r.randint(int(schema.get("minItems", 0)), min(int(schema.get("maxItems", 3)), 3))
            return [self.valid(items, root, name, depth + 1) for _ in range(count)] if depth < 6 else []
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        value = {}
        for prop, sub in properties.items():
            if prop in required or (depth < 4 and r.random() < 0.5):
                value[prop] = self.valid(sub, root, prop, depth + 1)
        return value

    def _string(self, schema: dict[str, Any]) -> str:
        r = self.random
        low, high = int(schema.get("minLength", 0)), int(schema.get("maxLength", 40))
        pattern = schema.get("pattern")
        # No public address: whatever the fuzzer makes a browser or a webhook reach stays on loopback.
        candidates = [
            str(uuid.uuid4()),
            idempotency_key(),
            "proof-pc-1",
            self.portal + "/page/fuzz",
            "".join(
                r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(max(low, 8))
            ),
        ]
        if schema.get("format") == "uri" or (pattern and "http" in pattern):
            candidates.insert(0, self.portal + "/page/fuzz")
        for candidate in candidates:
            if (pattern is None or re.search(pattern, candidate)) and low <= len(candidate) <= max(high, low):
                return candidate
        return "x" * max(low, 1)

    def invalid(self, schema: dict[str, Any], root: dict[str, Any]) -> Any:
        """A value the schema refuses: a wrong type, an unknown field, a missing required field."""
        r = self.random
        value = self.valid(schema, root)
        choice = r.randrange(6)
        if choice == 0 or not isinstance(value, dict):
            return r.choice([[], "text", 7, None, True, 1.5])
        if choice == 1:
            value["x-unknown-field"] = "proof"
            return value
        if choice == 2 and schema.get("required"):
            value.pop(r.choice(schema["required"]), None)
            return value
        if value:
            prop = r.choice(list(value))
            value[prop] = r.choice([{"nested": True}, [1, 2], -(10**30), "\x00", "😀" * 3000, 10**30, None])
            return value
        value["x-unknown-field"] = 1
        return value


def _mcp_session(origin: str, key: str, body: Callable[[Any], Any]) -> Any:
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)  # one line per request otherwise
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            async with streamable_http_client(f"{origin}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return anyio.run(main)


@dataclass
class McpTally:
    calls: int = 0
    held: int = 0
    problems: Counter[str] = field(default_factory=Counter)

    def problem(self, what: str) -> None:
        self.problems[what[:100]] += 1


# Tools that end a computer: given one the fuzz created, never one of the stack's.
_OWN_COMPUTER_TOOLS = frozenset({"computer_delete"})


def _throwaway_computer(stack: Stack) -> str:
    """A computer the fuzz creates for a deleting call (its id, or an unknown one if the account is full)."""
    computer_id = f"fuzz-{uuid.uuid4().hex[:12]}"
    api(stack, "POST", "/api/computers", json={"id": computer_id}, timeout=10)
    return computer_id


def mcp_fuzz(stack: Stack, profile: Profile) -> list[Row]:
    """Every tool with schema-valid and schema-invalid arguments, with both keys, through the official
    client; then malformed JSON-RPC straight over HTTP."""
    import jsonschema

    offsets = log_offsets(stack)
    per_tool = 8 if profile.name == "short" else 60
    known: dict[str, list[Any]] = {
        "run_id": [
            run_create(stack, stack.computers[0], [{"tool": "request_takeover", "arguments": {"reason": "captcha"}}])
        ],
        "computer_id": list(stack.computers),
        "idempotency_key": [idempotency_key() for _ in range(3)],
    }
    known["url"] = [f"{stack.portal_url}/page/mcp"]
    values = SchemaValues(21, known, stack.portal_url)
    tally = McpTally()
    with runs_cancelled_after(stack):
        for index, key in enumerate((stack.runner_key, stack.observer_key)):
            url = stack.web_urls[index % len(stack.web_urls)]

            async def body(session: Any) -> None:
                tools = (await session.list_tools()).tools
                for tool in tools:
                    schema = tool.input_schema
                    for case in range(per_tool):
                        arguments = values.valid(schema, schema) if case % 2 == 0 else values.invalid(schema, schema)
                        if not isinstance(arguments, dict):
                            arguments = {"value": arguments}
                        if tool.name in _OWN_COMPUTER_TOOLS and isinstance(arguments.get("computer_id"), str):
                            # Deleting is what the tool is for: it deletes a computer of the fuzz's own,
                            # never the stack's (whose executors the next experiments need).
                            arguments["computer_id"] = _throwaway_computer(stack)
                        tally.calls += 1
                        try:
                            result = await session.call_tool(tool.name, arguments)
                        except Exception as exc:  # noqa: BLE001 - anything but a result is a finding
                            tally.problem(f"{tool.name}: {type(exc).__name__}: {str(exc)[:60]}")
                            continue
                        if result.is_error:
                            error = result.structured_content or {}
                            status = error.get("status")
                            if isinstance(error.get("error"), str) and isinstance(status, int) and 400 <= status < 500:
                                tally.held += 1
                            else:
                                tally.problem(f"{tool.name}: error result {json.dumps(error)[:80]}")
                            continue
                        if tool.output_schema is not None and result.structured_content is not None:
                            try:
                                jsonschema.validate(result.structured_content, tool.output_schema)
                            except jsonschema.ValidationError as exc:
                                tally.problem(f"{tool.name}: result off its schema: {exc.message[:60]}")
                                continue
                        tally.held += 1

            _mcp_session(url, key, body)
        raw = _mcp_raw(stack, 40 if profile.name == "short" else 400)
    rows = [
        Row(
            experiment="MCP tools fuzz (runner + observer keys)",
            tries=tally.calls,
            held=tally.held,
            lost=0,
            duplicated=0,
            figure=(
                f"{tally.calls} calls over every tool's inputSchema, half invalid; "
                + (
                    ", ".join(f"{n}× {p}" for p, n in tally.problems.most_common(3))
                    or "0 server errors, 0 results off schema"
                )
            ),  # fmt: skip
        ),
        raw,
        traceback_row("MCP fuzz", offsets),
    ]
    return rows


def _raw_bodies(r: random.Random, count: int) -> Iterator[bytes]:
    valid = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "runs_list", "arguments": {}}}
    shapes: list[Callable[[], Any]] = [
        lambda: b"{not json",
        lambda: b"",
        lambda: json.dumps([valid, valid]).encode(),
        lambda: json.dumps({**valid, "method": "no/such/method"}).encode(),
        lambda: json.dumps({**valid, "params": {"name": 7}}).encode(),
        lambda: json.dumps({**valid, "params": {"name": "run_get", "arguments": {"run_id": "\x00" * 10}}}).encode(),
        lambda: json.dumps({**valid, "jsonrpc": "1.0"}).encode(),
        lambda: json.dumps({**valid, "id": {"nested": [1]}}).encode(),
        lambda: json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
        lambda: json.dumps({**valid, "params": {"name": "run_create", "arguments": {"task": "😀" * 50000}}}).encode(),
        lambda: b"[" * 5000 + b"]" * 5000,
        lambda: bytes(r.randrange(256) for _ in range(r.randrange(1, 300))),
    ]
    for index in range(count):
        yield shapes[index % len(shapes)]()


def _mcp_raw(stack: Stack, count: int) -> Row:
    """Malformed or unexpected JSON-RPC: always a JSON answer below 500 (or an empty 202), never HTML."""
    r = random.Random(11)  # noqa: S311 - reproducible fuzzing
    held, problems = 0, Counter[str]()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    for index, payload in enumerate(_raw_bodies(r, count)):
        try:
            answer = api(
                stack,
                "POST",
                "/mcp",
                key=(stack.runner_key, stack.observer_key)[index % 2],
                data=payload,
                headers=headers,
            )
        except requests.RequestException as exc:
            problems[f"no answer: {type(exc).__name__}"] += 1
            continue
        media = answer.headers.get("Content-Type", "")
        if answer.status_code >= 500:
            problems[f"{answer.status_code}"] += 1
        elif "html" in media or answer.text.lstrip().lower().startswith("<"):
            problems["HTML"] += 1
        elif answer.status_code == 202 and not answer.content:
            held += 1
        elif media.startswith(("application/json", "text/event-stream")):
            held += 1
        else:
            problems[f"content type {media!r}"] += 1
    return Row(
        experiment="MCP JSON-RPC fuzz (raw HTTP)",
        tries=count,
        held=held,
        lost=0,
        duplicated=0,
        figure=", ".join(f"{n}× {p}" for p, n in problems.most_common(3))
        or f"{count} malformed requests: 0 ≥ 500, 0 HTML",
    )


# --- 11: WebSocket fuzz ---------------------------------------------------------------------------

KEYS = ["Backspace", "Tab", "Enter", "Escape", "Delete", "Home", "End", "ArrowUp", "ArrowDown", "ArrowLeft",
        "ArrowRight", "PageUp", "PageDown", "Shift", "Control", "Alt", "Meta", *(f"F{n}" for n in range(1, 13))]  # fmt: skip
# At most this many messages per second leave the fuzzer (all sockets together).
MESSAGES_PER_SECOND = 150


def valid_input(r: random.Random) -> dict[str, Any]:
    """A person's input within the spec (nothing that leaves the page: no navigate, no Enter)."""
    kind = r.choice(["pointer", "wheel", "text", "key"])
    if kind == "pointer":
        value: dict[str, Any] = {"type": "pointer", "phase": "move", "x": r.randint(0, 1279), "y": r.randint(0, 719)}
        if r.random() < 0.5:
            value["x"] = round(r.uniform(0, 1279), 2)
    elif kind == "wheel":
        value = {"type": "wheel", "delta_x": r.randint(-300, 300), "delta_y": r.randint(-300, 300)}
    elif kind == "text":
        value = {"type": "text", "text": r.choice(["", "a", "Olá", "😀", "x" * r.randint(1, 50)])}
    else:
        value = {
            "type": "key",
            "phase": r.choice(["down", "up"]),
            "key": r.choice(["a", "Z", "1", "Shift", "ArrowLeft"]),
        }
    return value


def _envelope(sequence: int, value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "input", "sequence": sequence, "input": value}


@dataclass(frozen=True)
class Invalid:
    what: str
    payload: str | bytes


def invalid_message(r: random.Random, last: int, mode: str, holding: bool) -> Invalid:
    """One message the gateway must refuse by ending the session, chosen at random among the ways
    a message can be wrong (format, fields, ranges, sequence, state); ``last`` is the last sequence sent."""
    sequence = last + 1
    good = _envelope(sequence, valid_input(r))
    text = json.dumps(good)
    choices: list[Callable[[], Invalid]] = [
        lambda: Invalid("not JSON", text[: r.randrange(1, len(text))]),
        lambda: Invalid("binary message", os.urandom(r.randint(1, 64))),
        lambda: Invalid("JSON but not an object", json.dumps(r.choice([[], [good], 1, "input", None, True]))),
        lambda: Invalid(
            "unknown type", json.dumps({**good, "type": r.choice(["click", "scroll", "Input", "", "hello"])})
        ),
        lambda: Invalid(
            "extra envelope field", json.dumps({**good, r.choice(["computer_id", "generation", "lease_id", "x"]): "v"})
        ),
        lambda: Invalid("extra input field", json.dumps({**good, "input": {**good["input"], "extra": 1}})),
        lambda: Invalid(
            "missing field", json.dumps(_without(good, r.choice(["type", "sequence", "input"])))
        ),
        lambda: Invalid(
            "sequence not an integer",
            json.dumps({**good, "sequence": r.choice([str(sequence), sequence + 0.5, True, None, [sequence]])}),
        ),
        lambda: Invalid(
            "sequence out of range", json.dumps({**good, "sequence": r.choice([0, -1, MAX_SAFE_INTEGER + 1, 10**30])})
        ),
        lambda: Invalid(
            "pointer out of the viewport",
            json.dumps(
                _envelope(sequence, {"type": "pointer", "phase": "move", "x": r.choice([-1, 1280, 1e9]), "y": 10})
            ),
        ),
        lambda: Invalid(
            "unknown pointer phase or button",
            json.dumps(_envelope(sequence, {"type": "pointer", "phase": r.choice(["click", "Down"]), "x": 1, "y": 1})),
        ),
        lambda: Invalid(
            "wheel out of range",
            json.dumps(_envelope(sequence, {"type": "wheel", "delta_x": 0, "delta_y": r.choice([2001, -2001, "1"])})),
        ),
        lambda: Invalid(
            "text over 4000 UTF-16 units",
            json.dumps(_envelope(sequence, {"type": "text", "text": r.choice(["a" * 4001, "😀" * 2001])})),
        ),
        lambda: Invalid(
            "key not in the list",
            json.dumps(
                _envelope(
                    sequence, {"type": "key", "phase": "down", "key": r.choice(["Control+A", "ab", "", "F13", "enter"])}
                )
            ),
        ),
        lambda: Invalid(
            "navigate to a refused URL",
            json.dumps(
                _envelope(
                    sequence,
                    {
                        "type": "navigate",
                        "url": r.choice(
                            [
                                "javascript:alert(1)",
                                "file:///etc/passwd",
                                "https://user:pw@example.com/",
                                "example.com",
                                "https://e.com/" + "a" * 4100,
                            ]
                        ),
                    },
                )
            ),
        ),
        lambda: Invalid(
            "a tab input without ram-tabs-v1",
            json.dumps(_envelope(sequence, {"type": "tab", "action": "switch", "tab": "t1"})),
        ),
        lambda: Invalid("over 16,000 bytes", json.dumps(_envelope(sequence, {"type": "text", "text": "a" * 16100}))),
        lambda: Invalid("takeover with a field", json.dumps({"type": "takeover", "now": True})),
        lambda: Invalid("release with a field", json.dumps({"type": "release", "grant": "x"})),
        lambda: Invalid("byte-level mutation", _mutated(r, text)),
    ]
    if holding:
        choices += [
            lambda: Invalid("repeated or lower sequence", json.dumps(_envelope(r.randint(0, last), valid_input(r)))),
            lambda: Invalid("second takeover", json.dumps({"type": "takeover"})),
        ]
    else:
        choices += [
            lambda: Invalid("input without a grant", json.dumps(_envelope(sequence, valid_input(r)))),
            lambda: Invalid("release without a grant", json.dumps({"type": "release"})),
        ]
        if mode == "observe":
            choices.append(lambda: Invalid("takeover in observe mode", json.dumps({"type": "takeover"})))
    return r.choice(choices)()


def _without(message: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != name}


def _mutated(r: random.Random, text: str) -> str:
    """Bytes flipped, dropped or inserted until the message is no longer JSON."""
    chars = list(text)
    for _ in range(50):
        position = r.randrange(len(chars))
        operation = r.randrange(3)
        if operation == 0:
            chars[position] = chr(r.randrange(32, 127))
        elif operation == 1 and len(chars) > 1:
            del chars[position]
        else:
            chars.insert(position, r.choice('{}[]",:\\'))
        candidate = "".join(chars)
        try:
            json.loads(candidate)
        except ValueError:
            return candidate
    return "".join(chars) + "}"


def executor_inputs(stack: Stack) -> int:
    """Inputs the executors handed to their browsers (every executor process of the stack, dead or alive)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(stack.var_dir / "prometheus"))
    total = 0.0
    for metric in registry.collect():
        if metric.name == "ram_executor_inputs":
            total += sum(s.value for s in metric.samples if s.name == "ram_executor_inputs_total")
    return int(total)


@dataclass
class WsTally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    valid: int = 0
    acked: int = 0
    invalid: int = 0
    ended: int = 0
    ended_with_error: int = 0
    closed_1009: int = 0
    sessions: int = 0
    refused_sessions: int = 0
    setup_failures: Counter[str] = field(default_factory=Counter)
    not_ended: Counter[str] = field(default_factory=Counter)
    acked_invalid: int = 0


class Pace:
    """A shared bound on the fuzzer's message rate."""

    def __init__(self, per_second: int) -> None:
        self.interval = 1.0 / per_second
        self.next = time.monotonic()
        self.lock = threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            self.next = max(self.next + self.interval, now)
            delay = self.next - now
        if delay > 0:
            time.sleep(delay)


def _open(stack: Stack, computer_id: str, mode: str, tally: WsTally) -> Any:
    """A new session's socket (a new ticket each time); None when the server refused it by design."""
    from websockets.sync.client import connect

    for _ in range(40):
        url = stack.next_url()
        answer = api(
            stack, "POST", "/api/visual/sessions", url=url, headers={"X-RAM-Intent": "visual-session"},
            json={"computer_id": computer_id, "mode": mode, "transport": "jpeg-websocket-v1"},
        )  # fmt: skip
        if answer.status_code == 429:  # the account's sockets: the previous one is still being closed
            with tally.lock:
                tally.refused_sessions += 1
            time.sleep(0.25)
            continue
        if answer.status_code != 201:
            raise RuntimeError(f"session answered {answer.status_code}: {answer.text[:100]}")
        session = answer.json()
        stack.plant(session["ticket"])
        socket = connect(
            url.replace("http://", "ws://", 1) + session["websocket_path"],
            subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
            open_timeout=20, max_size=8_000_000, ping_interval=None,
        )  # fmt: skip
        hello = json.loads(_next_text(socket, 20))
        if hello.get("type") != "hello":
            raise RuntimeError(f"first message {hello.get('type')!r}")
        return socket
    raise RuntimeError("no session after 40 tries")


def _next_text(socket: Any, seconds: float) -> str:
    """The next JSON message, skipping frames (their metadata and JPEG bytes)."""
    deadline = time.monotonic() + seconds
    while True:
        message = socket.recv(timeout=max(0.05, deadline - time.monotonic()))
        if isinstance(message, str) and json.loads(message).get("type") != "frame":
            return message


def _until_state(socket: Any, seconds: float, accept: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        message = json.loads(_next_text(socket, max(0.05, deadline - time.monotonic())))
        if message.get("type") == "error":
            raise RuntimeError(f"error: {message.get('message')}")
        if accept(message):
            return message


def _ended(socket: Any, seconds: float) -> tuple[bool, bool, int | None, bool]:
    """After an invalid message: (ended, an error message came first, close code, an ack came)."""
    from websockets.exceptions import ConnectionClosed

    deadline = time.monotonic() + seconds
    saw_error = saw_ack = False
    while time.monotonic() < deadline:
        try:
            message = socket.recv(timeout=max(0.05, deadline - time.monotonic()))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
            return True, saw_error, code, saw_ack
        except TimeoutError:
            break
        if isinstance(message, str):
            kind = json.loads(message).get("type")
            saw_error = saw_error or kind == "error"
            saw_ack = saw_ack or kind == "ack"
    return False, saw_error, None, saw_ack


def _fuzz_session(stack: Stack, r: random.Random, computer_id: str, tally: WsTally, pace: Pace) -> None:
    """One session: maybe a takeover and a few valid inputs (each acked), then one invalid message."""
    mode = "control" if r.random() < 0.8 else "observe"
    holding = mode == "control" and r.random() < 0.75
    try:
        socket = _open(stack, computer_id, mode, tally)
    except Exception as exc:  # noqa: BLE001 - counted, never silent
        with tally.lock:
            tally.setup_failures[f"open: {str(exc)[:60]}"] += 1
        return
    with socket:
        sequence = 0
        try:
            if holding:
                pace.wait()
                socket.send(json.dumps({"type": "takeover"}))
                with tally.lock:
                    tally.sent += 1
                    tally.valid += 1
                _until_state(socket, 30, lambda m: m.get("type") == "state" and m.get("controlling") is True)
                for _ in range(r.randint(0, 3)):
                    sequence += r.randint(1, 3)
                    pace.wait()
                    socket.send(json.dumps(_envelope(sequence, valid_input(r))))
                    with tally.lock:
                        tally.sent += 1
                        tally.valid += 1
                    _until_state(socket, 30, lambda m, s=sequence: m.get("type") == "ack" and m.get("sequence") == s)  # type: ignore[misc]
                    with tally.lock:
                        tally.acked += 1
        except Exception as exc:  # noqa: BLE001 - the valid part failed: a finding of its own
            with tally.lock:
                tally.setup_failures[f"valid part: {str(exc)[:60]}"] += 1
            return
        bad = invalid_message(r, sequence, mode, holding)
        pace.wait()
        # Already closed by the server (it ended the session for an earlier reason): still ended.
        with contextlib.suppress(Exception):
            socket.send(bad.payload)
        ended, with_error, code, acked = _ended(socket, 15)
        with tally.lock:
            tally.sessions += 1
            tally.sent += 1
            tally.invalid += 1
            if ended and not acked:
                tally.ended += 1
                tally.ended_with_error += 1 if with_error else 0
                tally.closed_1009 += 1 if code == 1009 else 0
            else:
                tally.not_ended[bad.what] += 1
            if acked:
                tally.acked_invalid += 1


def websocket_fuzz(stack: Stack, profile: Profile) -> list[Row]:
    cancel_open_runs(stack)  # no run acts on the computers while people take control
    offsets = log_offsets(stack)
    before = executor_inputs(stack)
    tally = WsTally()
    pace = Pace(MESSAGES_PER_SECOND)
    began = time.monotonic()

    def fuzzer(index: int) -> None:
        r = random.Random(1000 + index)  # noqa: S311 - reproducible fuzzing
        computer_id = stack.computers[index % len(stack.computers)]
        while True:
            with tally.lock:
                if tally.sent >= profile.ws_messages:
                    return
            _fuzz_session(stack, r, computer_id, tally, pace)

    # Two sockets at a time: the account's limit (RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT, default 2).
    threads = [threading.Thread(target=fuzzer, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    time.sleep(2)  # the last inputs' counters are written by the executors
    reached = executor_inputs(stack) - before
    stray = max(0, reached - tally.acked)
    problems = ", ".join(f"{n}× {what}" for what, n in (tally.not_ended + tally.setup_failures).most_common(3))
    return [
        Row(
            experiment="WebSocket fuzz",
            tries=tally.invalid,
            held=tally.ended,
            lost=stray,
            duplicated=0,
            figure=(
                f"{tally.sent} messages ({tally.valid} valid, {tally.invalid} invalid) in {tally.sessions} sessions, "
                f"{tally.sent / max(elapsed, 1):.0f}/s; every invalid one ended its session: {tally.ended}/{tally.invalid} "
                f"({tally.ended_with_error} with an error first, {tally.closed_1009} by 1009); "
                f"executors counted {reached} inputs for {tally.acked} acked" + (f"; {problems}" if problems else "")
            ),
        ),
        traceback_row("WebSocket fuzz", offsets),
    ]


# --- browser_login's hostile pages: the selector oracle and the show-password toggle ---------------

LOGIN_WAIT_SECONDS = 240
# How long each probe waits for its selector: long enough for a present element, short for the table.
PROBE_MS = 800


def _login_credential(stack: ProofStack) -> str:
    """The portal's credential stored for the proof's account (an operator's write, as in setup)."""
    from vault_bridge import embedded
    from vault_bridge.credentials import PortalCredential, portal_credential_write

    credential_id = "proof-hostile-" + uuid.uuid4().hex[:8]
    portal_credential_write(
        token=embedded.root_client(stack.var_dir, stack.bao_port).token,
        account_id=stack.account_id,
        credential_id=credential_id,
        credential=PortalCredential(
            username=stack.portal.username, password=stack.portal.password, origins=(stack.portal.origin,)
        ),
    )
    return credential_id


def _login_run(stack: ProofStack, computer_id: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A scripted run's settled steps (index, tool, state, result), or [] when it did not settle."""
    from django.db import close_old_connections

    from runs.models import Run, RunStep

    run_id = run_create(stack, computer_id, steps, goal="proof: a hostile login page")
    deadline = time.monotonic() + LOGIN_WAIT_SECONDS
    while time.monotonic() < deadline:
        close_old_connections()
        status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
        if status in ("succeeded", "failed", "cancelled", "waiting_for_input"):
            if status == "waiting_for_input":
                with contextlib.suppress(requests.RequestException):
                    api(stack, "POST", f"/api/runs/{run_id}/cancel")
            rows = RunStep.objects.filter(run_id=run_id).order_by("index").values("index", "tool", "state", "result")
            return [dict(row) for row in rows]
        time.sleep(0.5)
    return []


def _other_prefix(prefix: str) -> str:
    """A prefix of the same length that differs in every character (what a binary search would also try)."""
    return "".join("b" if ch == "a" else "a" for ch in prefix)


def _probes(username: str, password: str) -> list[tuple[str, str]]:
    """Pairs of selectors, the first matching a prefix of the secret, the second another of its length:
    a table row's accessible name (with the textboxes' values in it), the page's echo of the username,
    a value attribute."""
    pairs = []
    for secret in (username, password):
        prefix = secret[:3]
        for value in (prefix, _other_prefix(prefix)):
            pairs.append(f"internal:role=row[name=/{re.escape(value)}/]")
    pairs += [f"internal:text=/Signing in as {re.escape(v)}/" for v in (username[:3], _other_prefix(username[:3]))]
    pairs += [f'input[value^="{v}"]' for v in (username[:3], _other_prefix(username[:3]))]
    return list(zip(pairs[0::2], pairs[1::2], strict=True))


def _answer(step: dict[str, Any], selector: str) -> tuple[Any, ...]:
    """What the agent learns from a probe, with the probe's own selector taken out of the text."""
    result = step.get("result") or {}
    return (result.get("isError"), result.get("code"), str(result.get("content", "")).replace(selector, "<selector>"))


def login_selector_oracle(stack: ProofStack, profile: Profile) -> Row:
    """After browser_login on a table-row form that refuses in place, an agent probes the credential
    with value-matching selectors (wait_for on a role=row name regex, a text regex over the page's
    echo, a value attribute). Holds when every probe answers the same for a prefix of the secret as
    for another of its length (refused, or independent of the value), and the login was a refusal."""
    credential_id = _login_credential(stack)
    probes = _probes(stack.portal.username, stack.portal.password)
    held = lost = 0
    notes: list[str] = []
    tries = max(1, profile.repetitions // 2)
    for n in range(tries):
        steps: list[dict[str, Any]] = [
            {"tool": "navigate", "arguments": {"url": f"{stack.portal.origin}/table-login"}},
            {"tool": "browser_login", "arguments": {"credentialId": credential_id}, "on_error": "continue"},
        ]
        for pair in probes:
            steps += [
                {"tool": "wait_for", "arguments": {"selector": s, "timeout_ms": PROBE_MS}, "on_error": "continue"}
                for s in pair
            ]
        seen = _login_run(stack, stack.computers[n % 2], steps)
        if len(seen) < len(steps):  # the run settled with every step (and its closing one)
            lost += 1
            notes.append("the run did not settle")
            continue
        login = seen[1].get("result") or {}
        problems = []
        if login.get("isError") or "refused" not in str(login.get("content", "")):
            problems.append(f"browser_login answered {login.get('code') or 'success'}")
        for index, (true, other) in enumerate(probes):
            if _answer(seen[2 + 2 * index], true) != _answer(seen[3 + 2 * index], other):
                problems.append(f"probe {index + 1} answered by the value")
        if any(secret in json.dumps(seen, default=str) for secret in stack.planted_secrets):
            problems.append("a secret in a step's result")
        held += not problems
        notes += problems
    return Row(
        "browser_login: no selector oracle on the values",
        tries,
        held,
        lost,
        0,
        "; ".join(sorted(set(notes)))[:200]
        or f"{len(probes)} probe pairs per run (role=row name, page text, value attribute) answered alike",
    )


def _edges(png: bytes, box: tuple[int, int, int, int]) -> float:
    """Mean edge strength inside ``box`` (CSS pixels of a 1280-wide viewport) of a PNG."""
    import io

    from PIL import Image, ImageFilter, ImageStat

    image = Image.open(io.BytesIO(png)).convert("L")
    scale = image.width / 1280
    x, y, width, height = box
    inner = (int((x + 10) * scale), int((y + 6) * scale), int((x + width - 10) * scale), int((y + height - 6) * scale))
    return float(ImageStat.Stat(image.filter(ImageFilter.FIND_EDGES).crop(inner)).mean[0])


def login_toggle(stack: ProofStack, profile: Profile) -> Row:
    """browser_login with a show-password button as submitSelector: never a success verdict, and the
    agent's next screenshot shows no glyph where the password field is."""
    from computers.models import DiagnosticArtifact
    from proof.portal import TOGGLE_BOX

    credential_id = _login_credential(stack)
    held = lost = 0
    notes: list[str] = []
    tries = max(1, profile.repetitions // 2)
    for n in range(tries):
        steps = [
            {"tool": "navigate", "arguments": {"url": f"{stack.portal.origin}/toggle-login"}},
            {
                "tool": "browser_login",
                "arguments": {"credentialId": credential_id, "submitSelector": "#eye"},
                "on_error": "continue",
            },
            {"tool": "screenshot", "arguments": {}},
        ]
        seen = _login_run(stack, stack.computers[n % 2], steps)
        if len(seen) < len(steps):  # the run settled with every step (and its closing one)
            lost += 1
            notes.append("the run did not settle")
            continue
        login, shot = seen[1].get("result") or {}, seen[2].get("result") or {}
        problems = []
        if not login.get("isError"):
            problems.append("the toggle was answered as a sign-in")
        artifact = DiagnosticArtifact.objects.filter(pk=str(shot.get("artifact_id") or uuid.UUID(int=0))).first()
        if artifact is None:
            problems.append("no screenshot")
        elif _edges(bytes(artifact.data), TOGGLE_BOX) > 2.0:
            problems.append("the screenshot shows glyphs in the password field")
        held += not problems
        notes += problems
    return Row(
        "browser_login: a show-password toggle as submit",
        tries,
        held,
        lost,
        0,
        "; ".join(sorted(set(notes)))[:200] or "never a sign-in; the next screenshot shows no glyph in the field",
    )


# The echo's box may show no more edge than a blank field does; the page's own line must show glyphs.
ECHO_MAX_EDGES = 2.0
GLYPH_MIN_EDGES = 6.0


def echo_problems(png: bytes) -> list[str]:
    """What a screenshot of ``/echo-login`` shows that it must not: glyphs in the span that copies the
    username (its own text beside it, in the same font, must show glyphs: the measure sees them)."""
    from proof.portal import ECHO_BOX, ECHO_REF_BOX

    problems = []
    if _edges(png, ECHO_REF_BOX) < GLYPH_MIN_EDGES:
        problems.append("the page's own line shows no glyphs (nothing to compare with)")
    if _edges(png, ECHO_BOX) > ECHO_MAX_EDGES:
        problems.append("the screenshot shows glyphs of the echoed username")
    return problems


def login_echo(stack: ProofStack, profile: Profile) -> Row:
    """browser_login on a page whose span copies the typed username: the agent's next screenshot shows
    no glyph of it (the echo is covered at the page's rendering), the refusal's answer holds no secret."""
    from computers.models import DiagnosticArtifact

    credential_id = _login_credential(stack)
    held = lost = 0
    notes: list[str] = []
    tries = max(1, profile.repetitions // 2)
    for n in range(tries):
        steps = [
            {"tool": "navigate", "arguments": {"url": f"{stack.portal.origin}/echo-login"}},
            {"tool": "browser_login", "arguments": {"credentialId": credential_id}, "on_error": "continue"},
            {"tool": "screenshot", "arguments": {}},
            {"tool": "extract_text", "arguments": {"selector": "#echo"}, "on_error": "continue"},
        ]
        seen = _login_run(stack, stack.computers[n % 2], steps)
        if len(seen) < len(steps):  # the run settled with every step (and its closing one)
            lost += 1
            notes.append("the run did not settle")
            continue
        shot = seen[2].get("result") or {}
        problems = []
        artifact = DiagnosticArtifact.objects.filter(pk=str(shot.get("artifact_id") or uuid.UUID(int=0))).first()
        if artifact is None:
            problems.append("no screenshot")
        else:
            problems += echo_problems(bytes(artifact.data))
        if any(secret in json.dumps(seen, default=str) for secret in stack.planted_secrets):
            problems.append("a secret in a step's result")
        held += not problems
        notes += problems
    return Row(
        "browser_login: a page that echoes the username",
        tries,
        held,
        lost,
        0,
        "; ".join(sorted(set(notes)))[:200] or "the next screenshot shows no glyph of the echo; answers redacted",
    )


def login_hostile(stack: ProofStack, profile: Profile) -> list[Row]:
    return [login_selector_oracle(stack, profile), login_toggle(stack, profile), login_echo(stack, profile)]
