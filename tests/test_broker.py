"""The embedded default's broker (ramsite/broker.py) with real kombu producers and consumers in
separate processes, on real folders: every message is delivered whole, to one consumer, once it is
acknowledged it is gone, and what a killed consumer had taken is delivered again, marked so."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from ramsite.broker import RECOVER_SECONDS

# Producers and consumers run in processes of their own.
pytestmark = pytest.mark.live

FORK = multiprocessing.get_context("fork")
TRANSPORT = "ramsite.broker:Transport"


def options(root: Path) -> dict[str, Any]:
    for folder in ("queue", "control", "claims"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    return {
        "polling_interval": 0.01,
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "control_folder": str(root / "control"),
        "claims_folder": str(root / "claims"),
        "quarantine_folder": str(root / "quarantine"),
        "processed_folder": str(root / "processed"),
        "store_processed": False,
    }


def connection(root: Path) -> Connection:
    return Connection("ramfs://", transport=TRANSPORT, transport_options=options(root))


def produce(root: Path, writer: int, count: int, size: int) -> None:
    with connection(root) as conn, conn.SimpleQueue("tasks") as queue:
        for n in range(count):
            queue.put({"id": f"{writer}-{n}", "pad": "x" * size})


def consume(root: Path, results: Any, stop_after: int) -> None:
    """Take messages until none comes for a while; report each message's id (and whether it was whole)."""
    with connection(root) as conn, conn.SimpleQueue("tasks") as queue:
        seen = 0
        while seen < stop_after:
            try:
                message = queue.get(block=True, timeout=3)
            except queue.Empty:
                return
            body = message.payload
            results.put((body["id"], len(body["pad"]), message.delivery_info.get("redelivered", False)))
            message.ack()
            seen += 1


def take_and_die(root: Path, results: Any) -> None:
    """Take one message, say which, and die (SIGKILL) before acknowledging it."""
    with connection(root) as conn, conn.SimpleQueue("tasks") as queue:
        message = queue.get(block=True, timeout=10)
        results.put(message.payload["id"])
        results.close()
        results.join_thread()  # the id is sent before the process dies
        os.kill(os.getpid(), signal.SIGKILL)


def drain(results: Any) -> list[Any]:
    out = []
    while not results.empty():
        out.append(results.get())
    return out


def test_concurrent_writers_and_readers_deliver_every_message_whole_and_once(tmp_path: Path) -> None:
    # Large messages make a write span many file-system calls: a reader taking a file its writer
    # had not finished would see a truncated body (kombu's own transport: JSONDecodeError).
    writers, per_writer, size = 4, 100, 100_000
    results = FORK.Queue()
    consumers = [FORK.Process(target=consume, args=(tmp_path, results, 10_000)) for _ in range(3)]
    producers = [FORK.Process(target=produce, args=(tmp_path, w, per_writer, size)) for w in range(writers)]
    for process in [*consumers, *producers]:
        process.start()
    delivered: list[Any] = []
    for process in producers:
        process.join(timeout=120)
        assert process.exitcode == 0
    for process in consumers:
        while process.is_alive():
            delivered += drain(results)
            process.join(timeout=0.2)
        assert process.exitcode == 0, "a consumer died"
    delivered += drain(results)
    counts = Counter(message_id for message_id, _, _ in delivered)
    expected = {f"{w}-{n}" for w in range(writers) for n in range(per_writer)}
    assert set(counts) == expected, f"lost: {sorted(expected - set(counts))[:5]}"
    assert max(counts.values()) == 1, "a message was delivered twice"
    assert {length for _, length, _ in delivered} == {size}
    assert not any(redelivered for _, _, redelivered in delivered)
    assert not (tmp_path / "quarantine").exists()
    # Acknowledged messages leave nothing behind: no message, claim or temporary file.
    assert os.listdir(tmp_path / "queue") == []
    assert [p for p in (tmp_path / "claims").rglob("*") if p.is_file() and p.suffix != ".lock"] == []


def test_a_message_a_writer_has_not_finished_is_never_delivered(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with connection(tmp_path) as conn, conn.SimpleQueue("tasks") as queue:
        queue.put({"id": "whole"})
        folder = tmp_path / "queue"
        whole = os.listdir(folder)[0]
        # What a writer interrupted halfway leaves: the start of a message under a message's name
        # (kombu's own transport wrote there directly), sorted before the whole one.
        text = (folder / whole).read_text()
        (folder / f"0_{'0' * 8}-0000-0000-0000-{'0' * 12}.tasks.msg").write_text(text[: len(text) // 2])
        # And an unfinished write of this transport: a temporary file, which no reader takes.
        (folder / ".unfinished.tmp").write_text(text[:10])
        with caplog.at_level(logging.ERROR, logger="ramsite.broker"):
            message = queue.get(block=True, timeout=5)
        assert message.payload == {"id": "whole"}
        message.ack()
        with pytest.raises(queue.Empty):
            queue.get(block=True, timeout=0.5)
    assert "set aside an unreadable message" in caplog.text
    quarantined = list((tmp_path / "quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].name.endswith(".tasks.msg")
    assert os.listdir(folder) == [".unfinished.tmp"]


def test_what_a_killed_consumer_had_taken_is_delivered_again_marked_redelivered(tmp_path: Path) -> None:
    produce(tmp_path, 0, 3, 10)
    results = FORK.Queue()
    victim = FORK.Process(target=take_and_die, args=(tmp_path, results))
    victim.start()
    victim.join(timeout=30)
    assert victim.exitcode == -signal.SIGKILL
    taken = results.get(timeout=5)
    # While the killed consumer's claim waits to be found, the others are delivered as usual.
    consumer = FORK.Process(target=consume, args=(tmp_path, results, 3))
    consumer.start()
    consumer.join(timeout=30 + RECOVER_SECONDS)
    assert consumer.exitcode == 0
    delivered = drain(results)
    assert sorted(message_id for message_id, _, _ in delivered) == ["0-0", "0-1", "0-2"]
    assert [redelivered for message_id, _, redelivered in delivered if message_id == taken] == [True]
    assert not any(redelivered for message_id, _, redelivered in delivered if message_id != taken)
    assert os.listdir(tmp_path / "queue") == []


def test_a_clean_close_puts_unacknowledged_messages_back(tmp_path: Path) -> None:
    produce(tmp_path, 0, 1, 10)
    with connection(tmp_path) as conn, conn.SimpleQueue("tasks") as queue:
        message = queue.get(block=True, timeout=5)
        assert message.payload["id"] == "0-0"
    # Closed without acknowledging: the message is back in the queue, whole, marked redelivered.
    (name,) = os.listdir(tmp_path / "queue")
    payload = json.loads((tmp_path / "queue" / name).read_text())
    assert payload["properties"]["delivery_info"]["redelivered"] is True
    with connection(tmp_path) as conn, conn.SimpleQueue("tasks") as queue:
        again = queue.get(block=True, timeout=5)
        assert again.payload["id"] == "0-0" and again.delivery_info["redelivered"] is True
        again.ack()
    assert os.listdir(tmp_path / "queue") == []
