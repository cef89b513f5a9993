"""Python client for a RAM server.

``RamClient`` speaks the REST API of runs and checks intervention descriptors; ``client.run(id)``
gives a harness ``run.act(...)`` and ``run.observe()`` (``AsyncRamClient``: the same, awaited);
``observe_computer`` and ``HumanControl`` speak ``jpeg-websocket-v1``; ``verify_webhook``
checks the signature of RAM's webhooks.
"""

from ram_sdk.client import (
    ENDPOINTS,
    RUN_STATUSES,
    TERMINAL_STATUSES,
    AsyncRamClient,
    RamClient,
    RunStatus,
    check_intervention,
)
from ram_sdk.errors import (
    SECRET_FIELD_FOCUSED,
    SECRET_IN_ARGUMENTS,
    SELECTOR_VALUE_DEPENDENT,
    ControlError,
    InvalidDescriptor,
    RamApiError,
    RamError,
    UnsafeOrigin,
    VisualError,
)
from ram_sdk.harness import AsyncRunHandle, RunHandle
from ram_sdk.origins import checked_origin
from ram_sdk.visual import (
    MAX_JPEG_BYTES,
    HumanControl,
    VisualStream,
    check_client_message,
    check_input,
    check_server_message,
    create_visual_session,
    observe_computer,
    open_visual_stream,
)
from ram_sdk.webhooks import WebhookVerificationError, sign_webhook, verify_webhook

__all__ = [
    "ENDPOINTS",
    "SELECTOR_VALUE_DEPENDENT",
    "SECRET_IN_ARGUMENTS",
    "SECRET_FIELD_FOCUSED",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "RunStatus",
    "AsyncRamClient",
    "AsyncRunHandle",
    "MAX_JPEG_BYTES",
    "ControlError",
    "HumanControl",
    "InvalidDescriptor",
    "RamApiError",
    "RamClient",
    "RamError",
    "RunHandle",
    "UnsafeOrigin",
    "VisualError",
    "VisualStream",
    "WebhookVerificationError",
    "check_client_message",
    "check_input",
    "check_server_message",
    "check_intervention",
    "checked_origin",
    "create_visual_session",
    "observe_computer",
    "open_visual_stream",
    "sign_webhook",
    "verify_webhook",
]
