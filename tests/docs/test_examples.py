"""The user guide cannot rot: its examples run against a live server with a real
executor, its configuration is checked, and the REST reference is regenerated."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from accounts.models import Account
from executor.models import Computer
from runs.mcp import TOOL_KINDS
from runs.models import Run
from tests.support.vault import VaultServer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    info: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(*, info: str) -> list[Block]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1).strip() == info:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(page.name, line, info, match.group(2)))
    return found


PYTHON = blocks(info="python example")
SHELL = blocks(info="sh example")
JS = blocks(info="js example")
WEBHOOK_RECEIVERS = blocks(info="python webhook-receiver") + blocks(info="js webhook-receiver")
SDK_JS = ROOT / "sdk" / "js"


def _env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith(("RAM_", "VAULT_"))}
    keep["PATH"] = f"{Path(sys.executable).parent}:{keep.get('PATH', '')}"
    keep.update(extra)
    return keep


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture
def world(
    screen: Any,
    live_origin: str,
    account: Account,
    runner_key: str,
    make_paused_run: Callable[..., Run],
    allow_egress: Callable[[str], None],
) -> dict[str, str]:
    """What a reader has after the quickstart: a server, a runner key, paused runs, a ready computer."""
    computer = Computer.objects.get(pk="pc-1")
    allow_egress(live_origin)  # the computer may open this server's pages (the bring-your-own-agent example)
    from accounts.services import account_top_up

    account_top_up(account=account, microcredits=10_000_000, actor="docs")  # the example's model calls
    return {
        "RAM_URL": live_origin,
        "RAM_API_KEY": runner_key,
        "RAM_RUN_ID": str(make_paused_run(account, computer, "credential").id),
        "RAM_TAKEOVER_RUN_ID": str(make_paused_run(account, computer, "takeover").id),
        "RAM_COMPUTER_ID": computer.id,
    }


def test_the_guide_has_examples_of_each_interface() -> None:
    pages = {b.page for b in PYTHON + SHELL}
    assert {"quickstart.md", "mcp.md", "sdk.md"} <= pages
    assert any("observe_computer" in b.code for b in PYTHON) and any("HumanControl" in b.code for b in PYTHON)
    assert any("streamable_http_client" in b.code for b in PYTHON)
    # The TypeScript SDK beside the Python one: the descriptor, the screen, a person's control.
    assert {b.page for b in JS} == {"sdk.md"}
    for name in ("interventionDescriptor", "observeComputer", "bindHumanGestures", "runs.continue", "visualSessions.create"):
        assert any(name in b.code for b in JS), name


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_example_runs(block: Block, world: dict[str, str]) -> None:
    result = _run([sys.executable, "-c", block.code], _env(**world))
    assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"
    assert world["RAM_API_KEY"] not in result.stdout + result.stderr


@pytest.mark.parametrize("block", JS, ids=[b.id for b in JS])
def test_js_example_runs(block: Block, world: dict[str, str]) -> None:
    # Written inside the package, the example imports it by its own name ('@ram/sdk'), as a project would.
    assert (SDK_JS / "dist" / "index.js").is_file(), "build the TypeScript SDK first: make sdk-js"
    script = SDK_JS / f".docs-example-{block.line}.mjs"
    script.write_text(block.code)
    try:
        result = subprocess.run(["node", script.name], cwd=SDK_JS, env=_env(**world), capture_output=True, text=True, timeout=180)
    finally:
        script.unlink()
    assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"
    assert world["RAM_API_KEY"] not in result.stdout + result.stderr


@pytest.fixture
def webhook_world(live_origin: str, runner_key: str, settings: Any) -> Iterator[dict[str, str]]:
    """A live server and a webhook worker that may post to loopback, as the receiver examples say."""
    from django.db import connection

    from tests.support.webhooks import webhook_workers, worker_env

    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("a real worker needs the shared PostgreSQL database and the Redis broker")
    settings.RAM_WEBHOOK_EGRESS_ALLOW = ["127.0.0.1/32"]
    with webhook_workers(worker_env(RAM_WEBHOOK_EGRESS_ALLOW="127.0.0.1/32")) as start:
        start()
        yield {"RAM_URL": live_origin, "RAM_API_KEY": runner_key}


def test_the_webhook_guide_has_a_receiver_in_python_and_in_node() -> None:
    assert [(b.page, b.info) for b in WEBHOOK_RECEIVERS] == [
        ("webhooks.md", "python webhook-receiver"),
        ("webhooks.md", "js webhook-receiver"),
    ]


@pytest.mark.parametrize("block", WEBHOOK_RECEIVERS, ids=[b.id for b in WEBHOOK_RECEIVERS])
def test_webhook_receiver_example_runs(block: Block, webhook_world: dict[str, str]) -> None:
    if block.info.startswith("js"):
        assert (SDK_JS / "dist" / "index.js").is_file(), "build the TypeScript SDK first: make sdk-js"
        script = SDK_JS / f".docs-example-{block.line}.mjs"
        script.write_text(block.code)
        try:
            result = subprocess.run(["node", script.name], cwd=SDK_JS, env=_env(**webhook_world), capture_output=True, text=True, timeout=180)
        finally:
            script.unlink()
    else:
        result = _run([sys.executable, "-c", block.code], _env(**webhook_world))
    assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"
    assert "verified webhook.test from http://127.0.0.1:" in result.stdout
    assert webhook_world["RAM_API_KEY"] not in result.stdout + result.stderr
    assert "whsec_" not in result.stdout + result.stderr


@pytest.mark.parametrize("block", SHELL, ids=[b.id for b in SHELL])
def test_shell_example_runs(block: Block, world: dict[str, str]) -> None:
    result = _run(["bash", "-euo", "pipefail", "-c", block.code], _env(**world))
    assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"


def test_mcp_client_configuration_points_at_the_mcp_endpoint_with_a_bearer_placeholder() -> None:
    (block,) = blocks(info="json mcp-config")
    server = json.loads(block.code)["mcpServers"]["ram"]
    assert server["url"].startswith("https://") and server["url"].endswith("/mcp")
    assert server["headers"] == {"Authorization": "Bearer ${RAM_API_KEY}"}


def test_mcp_guide_lists_every_tool_with_the_keys_that_may_use_it() -> None:
    text = (DOCS / "mcp.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", text, re.MULTILINE))
    assert set(rows) == set(TOOL_KINDS)
    for tool, kinds in TOOL_KINDS.items():
        assert [k.strip() for k in rows[tool].split(",")] == list(kinds), tool


@pytest.mark.live  # manage.py check --deploy in a subprocess
def test_documented_production_environment_passes_the_deployment_checks(tmp_path: Path) -> None:
    (block,) = blocks(info="sh deploy-env")
    values = dict(line.split("=", 1) for line in block.code.splitlines() if line and not line.startswith("#"))
    env = {k: v for k, v in _env().items() if not k.startswith(("DATABASE_", "REDIS_", "DJANGO_"))}
    env.update(values, RAM_VAR_DIR=str(tmp_path))
    result = _run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_documented_vault_setup_runs_against_a_real_openbao(openbao: VaultServer) -> None:
    import hvac

    (block,) = blocks(info="python vault-setup")
    # The session's OpenBao and its mount: the setup rewrites the same policies, so other tests' tokens keep working.
    env = _env(VAULT_ADDR=openbao.addr, VAULT_TOKEN=openbao.root_token, VAULT_KV_MOUNT=openbao.kv_mount)
    result = _run([sys.executable, "-c", block.code], env)
    assert result.returncode == 0, result.stderr
    server_token = re.search(r"VAULT_TOKEN for web and worker hosts: (\S+)", result.stdout)
    assert server_token is not None
    policies = hvac.Client(url=openbao.addr, token=server_token.group(1)).auth.token.lookup_self()["data"]["policies"]
    assert "ram-server" in policies and set(policies) <= {"default", "ram-server"}


def test_documented_commands_exist() -> None:
    from django.core.management import get_commands

    text = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    commands = set(re.findall(r"manage\.py (\w+)", text))
    assert {"migrate", "run_executor", "check", "seed_demo"} <= commands
    assert commands <= set(get_commands())
    assert "celery -A ramsite worker" in text and "uvicorn ramsite.asgi:application" in text
    from ramsite.asgi import application  # noqa: F401  (the documented uvicorn target)
    from ramsite.celery import app

    assert app.main == "ramsite"


def test_committed_rest_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location("rest_reference", ROOT / "scripts" / "rest_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import ramsite.urls  # noqa: F401
    from core.api import openapi_document

    expected = module.render(openapi_document())
    assert (DOCS / "rest.md").read_text() == expected, "docs/rest.md is stale: run .venv/bin/python scripts/rest_reference.py"
    for path in openapi_document()["paths"]:
        assert f" {path}`" in expected


def test_readme_links_the_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in ("docs/quickstart.md", "docs/mcp.md", "docs/sdk.md", "docs/deployment.md"):
        assert page in readme


def test_keys_in_the_guide_are_placeholders() -> None:
    text = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    assert not re.search(r"ram_(?:rk|ok)_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", text)
