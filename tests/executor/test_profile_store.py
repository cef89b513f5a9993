"""A computer's profile any host can restore: a clean stop stores it (encrypted, in the artifact
store), a start on another host (another, empty profile directory) restores it with its logins; a
host killed with SIGKILL loses the logins made since the last clean stop; a deletion removes every
stored copy. Real ``run_executor`` processes and Chromium, as in production."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.models import Account
from computers.artifacts import artifact_storage
from computers.models import Computer, StoredProfile
from computers.profiles import PREFIX, profile_decrypt, profile_load
from computers.services import computer_delete, computer_profile_reset, executor_register, executor_token_issue
from executor import profile_store
from executor.profile import JOURNAL, SECRET_FILES, USER_DATA, Profile
from executor.profile_store import CACHE_DIRS
from tests.executor.test_profile import crash, portal_heading, ready, sign_in, start, stop
from tests.support.site import Site, serve_site
from tests.support.waits import eventually

pytestmark = pytest.mark.live


@pytest.fixture
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture
def hosts() -> Iterator[Callable[[], Path]]:
    """A new profile directory for each "host" the computer starts on (none shares a disk)."""
    made: list[Path] = []

    def new_host() -> Path:
        root = Path(tempfile.mkdtemp(prefix="ram-host-"))
        made.append(root)
        return root / "profiles"

    yield new_host
    for root in made:
        subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607 - a test's own directory


def stored_files(computer_id: str) -> list[str]:
    try:
        return artifact_storage().listdir(f"{PREFIX}/{computer_id}")[1]
    except FileNotFoundError:
        return []


def stop_cleanly(process: subprocess.Popen[bytes]) -> None:
    stop(process)
    assert process.returncode == 0


def test_a_profile_moves_to_another_host_and_a_sigkill_loses_only_the_logins_since_the_last_clean_stop(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], site: Site, hosts: Callable[[], Path]
) -> None:
    make_computer(account, "pc-roam")
    first_host = hosts()
    process = start("pc-roam", first_host, site, live_origin)
    try:
        computer = ready("pc-roam")
        sign_in(computer, site, "Ana")
        (ana_sid,) = site.sessions
        journal = first_host / "pc-roam" / str(computer.profile_generation) / JOURNAL
        eventually(lambda: journal.exists() and ana_sid in journal.read_text(), 10, interval=0.1)
        stop_cleanly(process)

        # Stored at the clean stop: one encrypted blob, neither the cookie nor a password DB readable in it.
        stored = eventually(lambda: StoredProfile.objects.filter(computer_id="pc-roam").first(), 10, interval=0.1)
        assert stored.profile_generation == computer.profile_generation
        assert stored_files("pc-roam") == [stored.storage_name.rsplit("/", 1)[1]]
        with artifact_storage().open(stored.storage_name, "rb") as handle:
            blob = handle.read()
        assert ana_sid.encode() not in blob
        assert b"SQLite format" not in blob and b"Login Data" not in blob and b"Cookies" not in blob
        # Only the server's key opens it, and only for this computer and profile generation.
        assert (
            profile_decrypt(computer_id="pc-other", profile_generation=computer.profile_generation, blob=blob) is None
        )
        archive = profile_load(computer_id="pc-roam", profile_generation=computer.profile_generation)
        assert archive is not None
        names = tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz").getnames()
        parts = {part for name in names for part in name.split("/")}
        assert "Cookies" in parts and JOURNAL in names
        assert not parts & SECRET_FILES
        assert not parts & CACHE_DIRS

        # Another host, its profile directory empty: the computer starts signed in.
        second_host = hosts()
        process = start("pc-roam", second_host, site, live_origin)
        moved = ready("pc-roam", not_generation=computer.generation)
        assert portal_heading(moved, site) == "Signed in as Ana"

        # A new login there (the site forgets Ana's session for a moment, so it offers its form
        # again; the new cookie replaces hers in the browser), then the host is killed (SIGKILL).
        site.sessions.pop(ana_sid)
        sign_in(moved, site, "Bea")
        site.sessions[ana_sid] = "Ana"
        (bea_sid,) = set(site.sessions) - {ana_sid}
        bea_journal = second_host / "pc-roam" / str(moved.profile_generation) / JOURNAL
        eventually(lambda: bea_journal.exists() and bea_sid in bea_journal.read_text(), 10, interval=0.1)
        assert portal_heading(moved, site) == "Signed in as Bea"
        crash(process)
        assert StoredProfile.objects.get(computer_id="pc-roam").storage_name == stored.storage_name

        # On a third host the login made since the last clean stop is lost; the older one is back.
        process = start("pc-roam", hosts(), site, live_origin)
        third = ready("pc-roam", not_generation=moved.generation)
        assert portal_heading(third, site) == "Signed in as Ana"

        # DELETE removes every stored copy; the running executor stops without storing its profile again.
        computer_delete(computer=third)
        process.wait(timeout=60)
        assert not StoredProfile.objects.filter(computer_id="pc-roam").exists()
        assert stored_files("pc-roam") == []
    finally:
        stop(process)


def test_a_computer_back_on_a_host_it_left_starts_from_its_last_clean_stop_elsewhere(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], site: Site, hosts: Callable[[], Path]
) -> None:
    """On host A, then B (a new login, a clean stop), then A again: A's own older copy is replaced
    by the one B stored (on the code that restored only onto an empty directory, A's copy won)."""
    make_computer(account, "pc-back")
    host_a, host_b = hosts(), hosts()
    process = start("pc-back", host_a, site, live_origin)
    try:
        first = ready("pc-back")
        sign_in(first, site, "Ana")
        (ana_sid,) = site.sessions
        journal = host_a / "pc-back" / str(first.profile_generation) / JOURNAL
        eventually(lambda: journal.exists() and ana_sid in journal.read_text(), 10, interval=0.1)
        stop_cleanly(process)
        from_a = eventually(lambda: StoredProfile.objects.filter(computer_id="pc-back").first(), 10, interval=0.1)

        process = start("pc-back", host_b, site, live_origin)
        second = ready("pc-back", not_generation=first.generation)
        assert portal_heading(second, site) == "Signed in as Ana"
        site.sessions.pop(ana_sid)
        sign_in(second, site, "Bea")
        site.sessions[ana_sid] = "Ana"
        stop_cleanly(process)
        eventually(
            lambda: StoredProfile.objects.filter(computer_id="pc-back").exclude(generation=from_a.generation).exists(),
            10,
            interval=0.1,
        )
        assert (host_a / "pc-back" / str(first.profile_generation)).is_dir()  # A still holds its older copy

        process = start("pc-back", host_a, site, live_origin)
        third = ready("pc-back", not_generation=second.generation)
        assert portal_heading(third, site) == "Signed in as Bea"
    finally:
        stop(process)


def test_the_server_keeps_one_profile_only_from_the_current_generations_as_declared_and_a_reset_forgets_it(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-kept")
    token = executor_token_issue(computer_id="pc-kept")
    generation = uuid.uuid4()
    assert executor_register(computer_id="pc-kept", generation=generation, address="127.0.0.1:9")
    profile_generation = Computer.objects.get(pk="pc-kept").profile_generation

    def send(data: bytes, *, size: int | None = None, sha256: str | None = None, **fields: Any) -> httpx.Response:
        meta = {
            "generation": str(generation),
            "profile_generation": str(profile_generation),
            "size": len(data) if size is None else size,
            "sha256": hashlib.sha256(data).hexdigest() if sha256 is None else sha256,
            **fields,
        }
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/octet-stream",
            "Ram-Profile": json.dumps(meta),
        }
        return httpx.post(
            f"{live_origin}/internal/executors/pc-kept/profile/store", content=data, headers=headers, timeout=20
        )

    def restore(asked: uuid.UUID) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"}
        url = f"{live_origin}/internal/executors/pc-kept/profile/restore"
        return httpx.post(url, json={"profile_generation": str(asked)}, headers=headers, timeout=20)

    for refused in [send(b"profile", extra=1), send(b"profile", size=3)]:  # a closed header; a size not the body's
        assert refused.status_code == 400 and set(refused.json()) == {"error"}, refused.text
    not_kept = [
        send(b"profile", sha256=hashlib.sha256(b"other").hexdigest()),  # another archive's digest
        send(b"profile", generation=str(uuid.uuid4())),  # an executor generation that is not the current one
        send(b"profile", profile_generation=str(uuid.uuid4())),  # another profile generation
    ]
    for response in not_kept:
        assert response.status_code == 200 and response.json() == {"stored": False}, response.text
    assert not StoredProfile.objects.exists() and stored_files("pc-kept") == []

    assert send(b"first profile").json() == {"stored": True}
    assert send(b"second profile").json() == {"stored": True}
    assert len(stored_files("pc-kept")) == 1  # the older one was deleted
    answer = restore(profile_generation)
    assert answer.status_code == 200 and answer.content == b"second profile"
    assert restore(uuid.uuid4()).json() == {"profile": None}
    assert restore(profile_generation).headers["Content-Type"] == "application/octet-stream"

    computer_profile_reset(computer=Computer.objects.get(pk="pc-kept"))
    assert not StoredProfile.objects.exists() and stored_files("pc-kept") == []
    assert restore(profile_generation).json() == {"profile": None}


def test_a_stored_profile_that_would_unpack_beyond_the_bound_is_refused_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small archive of a large file (whatever stored it) fills no disk: refused before any byte is written."""
    monkeypatch.setattr(profile_store, "MAX_UNPACKED_BYTES", 1024 * 1024)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        member = tarfile.TarInfo(f"{USER_DATA}/Default/Big")
        member.size = 2 * 1024 * 1024
        archive.addfile(member, io.BytesIO(b"\0" * member.size))
    assert len(buffer.getvalue()) < 64 * 1024
    profile = Profile(root=tmp_path / "profiles", computer_id="pc-bomb")
    generation = uuid.uuid4()
    with pytest.raises(tarfile.TarError):
        profile_store.unpack(profile, generation, buffer.getvalue())
    assert not (profile.user_data_dir(generation) / "Default" / "Big").exists()


def test_the_session_restore_files_are_never_packed(tmp_path: Path) -> None:
    """What session restore keeps (every tab's form state: what was typed) never reaches the store,
    whether as a ``Sessions`` directory or as the older single files; the cookies do."""
    profile = Profile(root=tmp_path / "profiles", computer_id="pc-pack")
    generation = uuid.uuid4()
    default = profile.user_data_dir(generation) / "Default"
    (default / "Sessions").mkdir(parents=True)
    (default / "Sessions" / "Session_1").write_text("typed-into-a-form")
    for name in ("Current Session", "Last Session", "Current Tabs", "Last Tabs"):
        (default / name).write_text("typed-into-a-form")
    (default / "Cookies").write_bytes(b"cookies")
    archive = profile_store.pack(profile, generation)
    assert archive is not None
    names = tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz").getnames()
    assert any(name.endswith("Default/Cookies") for name in names)
    assert not [name for name in names if "Session" in name or "Tabs" in name], names
