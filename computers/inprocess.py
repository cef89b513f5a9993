"""The server link of an executor started inside a server process (tests, benchmarks).

It calls the services the internal endpoint calls (``computers/internal.py``), off the event
loop; ``run_executor`` never uses it (an executor process has no database access).
"""

from __future__ import annotations

import hashlib
import io
import uuid
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async

from computers.artifacts import artifact_store_from_thread
from computers.errors import ExecutorBindingChanged
from computers.files import download_store_from_thread, upload_for_run_from_thread
from computers.profiles import profile_load, profile_store
from computers.recordings import recording_segment_store_from_thread
from computers.selectors import computer_binding_holds, computer_profile_generation
from computers.services import (
    computer_browser_session_record,
    computer_browser_session_released,
    executor_browser_config,
    executor_heartbeat,
    executor_launch_settings,
    executor_private_token,
    executor_register,
    executor_stopped,
)
from executor.server_link import BindingChanged, BrowserConfig, LaunchConfig, SegmentUpload, StoredFile, UploadFile


class InProcessServerLink:
    def __init__(self, computer_id: str) -> None:
        self.computer_id = computer_id

    async def register(self, *, generation: uuid.UUID, address: str) -> bool:
        return await sync_to_async(executor_register)(computer_id=self.computer_id, generation=generation, address=address)

    async def private_token(self, *, generation: uuid.UUID) -> str:
        return executor_private_token(computer_id=self.computer_id, generation=generation)

    async def heartbeat(self, *, generation: uuid.UUID) -> str:
        return await sync_to_async(executor_heartbeat)(computer_id=self.computer_id, generation=generation)

    async def stopped(self, *, generation: uuid.UUID, failed: bool) -> None:
        await sync_to_async(executor_stopped)(computer_id=self.computer_id, generation=generation, failed=failed)

    async def browser_config(self) -> BrowserConfig | None:
        return await sync_to_async(executor_browser_config, thread_sensitive=False)(computer_id=self.computer_id)

    async def launch_settings(self, *, proxy_grant: bool) -> LaunchConfig | None:
        return await sync_to_async(executor_launch_settings, thread_sensitive=False)(
            computer_id=self.computer_id, proxy_grant=proxy_grant
        )

    async def profile_generation(self) -> uuid.UUID | None:
        return await sync_to_async(computer_profile_generation, thread_sensitive=False)(computer_id=self.computer_id)

    async def session_record(self, *, session_id: str, ready_ms: int | None) -> None:
        await sync_to_async(computer_browser_session_record, thread_sensitive=False)(
            computer_id=self.computer_id, session_id=session_id, ready_ms=ready_ms
        )

    async def session_released(self, *, session_id: str) -> None:
        await sync_to_async(computer_browser_session_released, thread_sensitive=False)(
            computer_id=self.computer_id, session_id=session_id
        )

    async def binding_holds(self, *, account_id: str, binding: str) -> bool:
        return await sync_to_async(computer_binding_holds, thread_sensitive=False)(
            computer_id=self.computer_id, account_id=account_id, binding=binding
        )

    async def artifact_store(self, *, kind: str, data: bytes, content_type: str = "image/png") -> uuid.UUID:
        return await sync_to_async(artifact_store_from_thread, thread_sensitive=False)(
            computer_id=self.computer_id, kind=kind, data=data, content_type=content_type
        )

    async def recording_segment_store(self, segment: SegmentUpload) -> None:
        await sync_to_async(recording_segment_store_from_thread, thread_sensitive=False)(
            computer_id=self.computer_id, body=segment.body()
        )

    async def download_store(self, *, path: Path, filename: str, size: int, sha256: str) -> StoredFile | None:
        return await sync_to_async(_download_from_file, thread_sensitive=False)(
            computer_id=self.computer_id, path=path, filename=filename, size=size, sha256=sha256
        )

    async def upload_read(self, *, account_id: str, binding: str, artifact_id: str) -> UploadFile | None:
        try:
            return await sync_to_async(upload_for_run_from_thread, thread_sensitive=False)(
                computer_id=self.computer_id, account_id=account_id, binding=binding, artifact_id=artifact_id
            )
        except ExecutorBindingChanged:
            raise BindingChanged() from None

    async def profile_store(self, *, generation: uuid.UUID, profile_generation: uuid.UUID, data: bytes) -> bool:
        return await sync_to_async(_profile_from_bytes, thread_sensitive=False)(
            computer_id=self.computer_id, generation=generation, profile_generation=profile_generation, data=data
        )

    async def profile_restore(self, *, profile_generation: uuid.UUID) -> bytes | None:
        return await sync_to_async(profile_load, thread_sensitive=False)(
            computer_id=self.computer_id, profile_generation=profile_generation
        )


def _profile_from_bytes(*, data: bytes, **kwargs: Any) -> bool:
    return profile_store(stream=io.BytesIO(data), size=len(data), sha256=hashlib.sha256(data).hexdigest(), **kwargs)


def _download_from_file(*, path: Path, **kwargs: Any) -> StoredFile | None:
    with open(path, "rb") as stream:
        return download_store_from_thread(stream=stream, **kwargs)
