"""Wire shapes of the executor→server link: the bodies of the executors' internal endpoint
(``executor/internal.py`` on the server, ``executor/server_link.py`` in the executor) and the
headers that describe a file's bytes beside them."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from core.contracts import Closed

StrictBool = Annotated[bool, Field(strict=True)]


class InternalRegister(Closed):
    generation: uuid.UUID
    address: Annotated[str, StringConstraints(max_length=200)]


class InternalGeneration(Closed):
    generation: uuid.UUID


class InternalStopped(Closed):
    generation: uuid.UUID
    failed: bool = False


class InternalEmpty(Closed):
    pass


class InternalSettings(Closed):
    proxy_grant: StrictBool = False


class InternalSession(Closed):
    session_id: Annotated[str, StringConstraints(max_length=200)]
    ready_ms: Annotated[int, Field(ge=0, le=3_600_000)] | None = None


class InternalSessionReleased(Closed):
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class InternalBinding(Closed):
    account_id: Annotated[str, StringConstraints(max_length=64)]
    binding: Annotated[str, StringConstraints(max_length=64)]


class InternalArtifact(Closed):
    kind: Literal["diagnostic", "screenshot"]
    content_type: Literal["image/png"] = "image/png"
    # base64 of the masked capture (at most 8 MiB decoded)
    data: Annotated[str, StringConstraints(max_length=11_200_000)]


class InternalRecordingPeriod(Closed):
    """A period of a person's control of the computer during a recording (ms from its start)."""

    start_ms: Annotated[int, Field(ge=0)]
    end_ms: Annotated[int, Field(ge=0)] | None
    inputs: Annotated[int, Field(ge=0)]
    recorded: bool


class InternalRecordingSegment(Closed):
    """A closed segment of a run's recording (``executor/recording.py``): a complete WebM file
    (base64; empty for the last call of a recording that closed with nothing more to send)."""

    recording_id: uuid.UUID
    index: Annotated[int, Field(ge=0, le=100_000)]
    offset_ms: Annotated[int, Field(ge=0)]
    duration_ms: Annotated[int, Field(ge=0)]
    frames: Annotated[int, Field(ge=0)]
    final: bool
    capped: Literal["", "minutes", "bytes"]
    periods: Annotated[list[InternalRecordingPeriod], Field(max_length=200)]
    data: Annotated[str, StringConstraints(max_length=11_200_000)]


Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class InternalDownload(Closed):
    """What the ``downloads`` operation's ``Ram-Download`` header declares of the bytes in its body
    (the server stores them only when they are exactly ``size`` bytes with this SHA-256)."""

    filename: Annotated[str, StringConstraints(max_length=255)]
    size: Annotated[int, Field(ge=0, le=2**31 - 1)]
    sha256: Sha256Hex


class InternalUploadRead(Closed):
    """An upload the ``upload`` action sets on the page: read for the run's account only, once the
    run's binding to this computer holds."""

    account_id: Annotated[str, StringConstraints(max_length=64)]
    binding: Annotated[str, StringConstraints(max_length=64)]
    artifact_id: uuid.UUID


class InternalUploadFile(Closed):
    """The ``Ram-Upload`` header of the ``uploads/read`` answer, whose body is the file's bytes."""

    artifact_id: uuid.UUID
    filename: Annotated[str, StringConstraints(max_length=255)]
    content_type: Annotated[str, StringConstraints(max_length=100)]
    size: Annotated[int, Field(ge=0)]
    sha256: Sha256Hex


ComputerKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")]


class InternalHostHealth(Closed):
    load1: Annotated[float, Field(ge=0)] | None = None
    memory_available_mb: Annotated[int, Field(ge=0)] | None = None


class InternalHostSync(Closed):
    """An executor host's report (``POST /internal/hosts/<host>/sync``): its slots, the computers whose
    executor it runs now, those whose executor exited since its last report, its health."""

    capacity: Annotated[int, Field(ge=0, le=1000)]
    running: Annotated[list[ComputerKey], Field(max_length=1000)] = []
    exited: Annotated[list[ComputerKey], Field(max_length=1000)] = []
    health: InternalHostHealth = InternalHostHealth()


class InternalHostStart(Closed):
    computer_id: ComputerKey
    # The computer's fresh executor token: handed to its executor in its environment only.
    token: str


class InternalHostOrders(Closed):
    start: list[InternalHostStart]
    stop: list[ComputerKey]


class InternalProfileStore(Closed):
    """The ``Ram-Profile`` header of ``profile/store``, whose body is the packed profile (at a clean
    stop): stored only for the computer's current executor and profile generations."""

    generation: uuid.UUID
    profile_generation: uuid.UUID
    size: Annotated[int, Field(ge=1, le=2**30)]
    sha256: Sha256Hex


class InternalProfileRestore(Closed):
    profile_generation: uuid.UUID


class InternalProfileFile(Closed):
    """The ``Ram-Profile`` header of the ``profile/restore`` answer, whose body is the packed profile."""

    size: Annotated[int, Field(ge=1)]
    sha256: Sha256Hex
