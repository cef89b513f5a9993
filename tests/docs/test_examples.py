"""The user guide cannot rot: its examples run against a live server with a real
executor, its configuration is checked, and the REST reference is regenerated."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import hvac
import pytest
from django.core.management import get_commands
from django.db import connection

import ramsite.urls  # noqa: F401
from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from core.api import openapi_document
from ramsite.celery import app
from runs.mcp import TOOL_KINDS
from runs.models import Run
from runs.services import run_cancel
from tests.docs.readme import five_minute_blocks
from tests.support.tiers import live
from tests.support.vault import VaultServer
from tests.support.webhooks import webhook_workers, worker_env

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


EXAMPLE_HEADING = "Example Domain"


@pytest.fixture
def example_page(allow_egress: Callable[[str], None]) -> Iterator[ExamplePage]:
    """A local stand-in for https://example.com/ (the tests reach no internet)."""
    page = ExamplePage()
    body = f"<!doctype html><title>Example</title><h1>{EXAMPLE_HEADING}</h1><p>For use in examples.</p>".encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            page.hits += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page.url = f"http://127.0.0.1:{server.server_address[1]}/"
    allow_egress(page.url)
    try:
        yield page
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class ExamplePage:
    url: str = ""
    hits: int = 0


@pytest.fixture(params=["fresh", "after_continue_and_cancel"])
@live
def world(
    request: pytest.FixtureRequest,
    screen: Any,
    live_origin: str,
    account: Account,
    runner_key: str,
    make_paused_run: Callable[..., Run],
    allow_egress: Callable[[str], None],
    example_page: ExamplePage,
    settings: Any,
) -> dict[str, str]:
    """What a reader has after the quickstart: a server, a runner key, paused runs, a ready computer.

    The account also holds a run that was continued and one that was cancelled, as after any real
    use; in ``after_continue_and_cancel`` the reader has also run the quickstart's continue of the
    takeover run already (with the docs' own key), so every example runs after that too.
    """
    computer = Computer.objects.get(pk="pc-1")
    # A run paused at a takeover keeps its computer (a person is on it): those wait on another
    # computer, so that RAM_COMPUTER_ID is free for the examples that start runs on it.
    held = Computer.objects.create(id="pc-2", account=account, name="pc-2")
    # The continuations below may be running on pc-2 (nothing runs them without a worker): room for
    # the examples' own runs beside them under the account's limit of running runs.
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 4
    allow_egress(live_origin)  # the computer may open this server's pages (the bring-your-own-agent example)

    account_top_up(account=account, microcredits=10_000_000, actor="docs")  # the example's model calls
    env = {
        "RAM_URL": live_origin,
        "RAM_API_KEY": runner_key,
        "RAM_RUN_ID": str(make_paused_run(account, computer, "credential").id),
        "RAM_TAKEOVER_RUN_ID": str(make_paused_run(account, held, "takeover").id),
        "RAM_COMPUTER_ID": computer.id,
        "RAM_EXAMPLE_URL": example_page.url,
    }
    headers = {"Authorization": f"Bearer {runner_key}"}
    earlier = make_paused_run(account, held, "takeover")
    continued = httpx.post(
        f"{live_origin}/api/runs/{earlier.id}/continue", json={"idempotency_key": f"earlier-{earlier.id}"}, headers=headers
    )
    assert continued.status_code == 201, continued.text
    run_cancel(run=make_paused_run(account, computer, "credential"))
    if request.param == "after_continue_and_cancel":
        taken = env["RAM_TAKEOVER_RUN_ID"]
        again = httpx.post(
            f"{live_origin}/api/runs/{taken}/continue", json={"idempotency_key": f"continue-{taken}"}, headers=headers
        )
        assert again.status_code == 201, again.text
        assert Run.objects.get(pk=taken).status == "continued"
        run_cancel(run=make_paused_run(account, computer, "connection"))
    return env


@pytest.fixture
def run_worker(transactional_db: None, settings: Any) -> Iterator[None]:
    """A real Celery worker for examples whose runs must actually run (the embedded default runs one too)."""
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("a real worker needs the shared PostgreSQL database and the Redis broker")
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "RAM_ACCOUNT_MAX_ACTIVE_RUNS": str(settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS),
    }
    app.control.purge()
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "--pool=solo", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=5)


def needs_worker(block: Block) -> bool:
    """An example whose run is played by the run loop (it waits for the run to finish)."""
    return "RAM_EXAMPLE_URL" in block.code


def assert_the_example_page_was_read(output: str, page: ExamplePage) -> None:
    """The visible effect of "Open example.com and read the heading": the computer opened the page,
    and the run succeeded with its heading as output."""
    assert page.hits >= 1, "the computer never opened the page"
    assert f"succeeded {EXAMPLE_HEADING}" in output, output
    run = Run.objects.filter(task__goal="Open example.com and read the heading").get()
    assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": EXAMPLE_HEADING}


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
def test_python_example_runs(
    block: Block, world: dict[str, str], example_page: ExamplePage, request: pytest.FixtureRequest
) -> None:
    if needs_worker(block):
        request.getfixturevalue("run_worker")
    result = _run([sys.executable, "-c", block.code], _env(**world))
    assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"
    assert world["RAM_API_KEY"] not in result.stdout + result.stderr
    if needs_worker(block):
        assert_the_example_page_was_read(result.stdout, example_page)


@pytest.mark.parametrize("block", JS, ids=[b.id for b in JS])
def test_js_example_runs(
    block: Block, world: dict[str, str], example_page: ExamplePage, request: pytest.FixtureRequest
) -> None:
    if needs_worker(block):
        request.getfixturevalue("run_worker")
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
    if needs_worker(block):
        assert_the_example_page_was_read(result.stdout, example_page)


@pytest.mark.parametrize("world", ["fresh"], indirect=True)
def test_the_create_example_says_why_a_run_failed(world: dict[str, str], run_worker: None) -> None:
    """The SDK guide's create example on a page the computer may not open: it prints the run's
    error (the step, the tool, the code), never a bare "failed None"."""
    (block,) = [b for b in PYTHON if b.page == "sdk.md" and "run_create(" in b.code and needs_worker(b)]
    refused = "http://10.0.0.1/"  # a private address, not opened to the computer's browser
    result = _run([sys.executable, "-c", block.code], _env(**{**world, "RAM_EXAMPLE_URL": refused}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "\nfailed Step 1 (navigate) failed [" in result.stdout, result.stdout
    assert "failed None" not in result.stdout


def test_the_example_that_says_it_reads_a_page_reads_it() -> None:
    """Every example whose goal is to open a page and read it plays steps that do (and is checked)."""
    for block in PYTHON + JS:
        if "Open example.com" in block.code:
            assert needs_worker(block), block.id
            assert "navigate" in block.code and "extract_text" in block.code, block.id


@pytest.fixture
def webhook_world(live_origin: str, runner_key: str, settings: Any) -> Iterator[dict[str, str]]:
    """A live server and a webhook worker that may post to loopback, as the receiver examples say."""
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
    text = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    commands = set(re.findall(r"manage\.py (\w+)", text))
    assert {"migrate", "run_executor", "check", "seed_demo"} <= commands
    assert commands <= set(get_commands())
    assert "celery -A ramsite worker" in text and "uvicorn ramsite.asgi:application" in text
    from ramsite.asgi import application  # noqa: F401, PLC0415 - importing the documented uvicorn target is the check

    assert app.main == "ramsite"


def test_committed_rest_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location("rest_reference", ROOT / "scripts" / "rest_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    expected = module.render(openapi_document())
    assert (DOCS / "rest.md").read_text() == expected, "docs/rest.md is stale: run .venv/bin/python scripts/rest_reference.py"
    for path in openapi_document()["paths"]:
        assert f" {path}`" in expected


def test_readme_links_the_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in ("docs/quickstart.md", "docs/mcp.md", "docs/sdk.md", "docs/deployment.md"):
        assert page in readme


def test_readme_links_every_docs_page_and_the_changelog() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md|CHANGELOG\.md)(?:#[\w-]*)?\)", readme))
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")} | {"CHANGELOG.md"}
    assert pages <= linked, sorted(pages - linked)


def test_readme_is_a_front_door() -> None:
    """What it is, two commands, five minutes, a tour, the limits, links: reference lives in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 16 * 1024, "README.md is over 16 KB: move reference to docs/"
    for heading in ("## Five minutes with RAM", "## Limits", "## Why uvicorn, not daphne", "## Documentation"):
        assert heading in readme
    assert "make run" in readme and "make test" in readme
    assert "## Changelog" not in readme  # CHANGELOG.md holds the history


def test_readme_five_minutes_use_only_what_their_first_block_defines() -> None:
    first, *rest = five_minute_blocks()
    assert "manage.py seed_demo --json" in first
    defined = set(re.findall(r'"(RAM_[A-Z_]+)":', first))
    assert {"RAM_URL", "RAM_API_KEY", "RAM_RUN_ID"} <= defined
    assert rest, "the path has a curl and an SDK call after its setup"
    readme = (ROOT / "README.md").read_text()
    used = set()
    for match in FENCE.finditer(readme):
        used |= set(re.findall(r"\$\{?([A-Z][A-Z_]+)", match.group(2)))
        used |= set(re.findall(r"os\.environ\[\"([A-Z][A-Z_]+)\"\]", match.group(2)))
    assert used <= defined, sorted(used - defined)
    assert any("curl" in block for block in rest) and any("ram_sdk" in block for block in rest)
    # The quickstart sets the same variables the same way (one block, copied, checked here).
    quickstart = [m.group(2) for m in FENCE.finditer((DOCS / "quickstart.md").read_text()) if "seed_demo" in m.group(2)]
    assert quickstart == [first]


def test_every_picture_the_docs_show_exists() -> None:
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        text = page.read_text()
        for target in re.findall(r'(?:src="|!\[[^\]]*\]\()([^")]+\.png)', text):
            assert (page.parent / target).is_file(), f"{page.name}: {target}"


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS.glob("*.md")]
    anchors = {
        page.resolve(): {_anchor(h) for h in re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE)}
        for page in pages
    }
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page.resolve()
            if not destination.exists() or (anchor and destination in anchors and anchor not in anchors[destination]):
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_changelog_has_an_unreleased_section_first() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", changelog, re.MULTILINE)
    assert headings[0] == "Unreleased"


def test_keys_in_the_guide_are_placeholders() -> None:
    text = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    assert not re.search(r"ram_(?:rk|ok)_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}", text)


def test_every_page_says_how_to_install_the_sdk_before_its_first_example_that_needs_it() -> None:
    """`make run` installs the server only: an example that imports ram_sdk says what to install."""
    requirements = (ROOT / "requirements.txt").read_text()
    assert "ram-sdk" not in requirements and "sdk/python" not in requirements
    for block in PYTHON:
        if re.search(r"^\s*(?:from|import) ram_sdk\b", block.code, re.MULTILINE):
            text = (DOCS / block.page).read_text()
            before = text[: text.index(block.code)]
            assert "pip install ./sdk/python" in before, f"{block.id} needs ram_sdk: say how to install it before"
