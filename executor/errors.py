"""Named errors of the computer's files (uploads a harness sends, downloads its executor sends) and of
the executors' internal endpoint."""

from __future__ import annotations

from core.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    PayloadTooLarge,
    UnsupportedMediaType,
)


class UploadInvalid(InvalidInput):
    code = "artifact.invalid"
    message_default = "Invalid upload."


class UploadTooLarge(PayloadTooLarge):
    code = "artifact.too_large"
    message_default = "The file is larger than this server accepts (RAM_UPLOAD_MAX_BYTES)."


class UploadTypeRefused(UnsupportedMediaType):
    code = "artifact.type_refused"
    message_default = "That content type is not accepted for uploads (RAM_UPLOAD_CONTENT_TYPES)."


class DownloadInvalid(InvalidInput):
    code = "executor.download_invalid"
    message_default = "The download's bytes do not match their declared SHA-256; nothing was stored."


class ExecutorTokenInvalid(NotAuthenticated):
    code = "executor.token_invalid"
    message_default = "A valid executor token (Authorization: Bearer ram_ex_...) is required."


class ExecutorTokenForeign(Forbidden):
    code = "executor.token_foreign"
    message_default = "This executor token belongs to another computer."


class ExecutorOperationUnknown(NotFound):
    code = "executor.operation_unknown"
    message_default = "No such internal operation."


class ExecutorBindingChanged(Conflict):
    code = "executor.binding_changed"
    message_default = "The run's computer binding changed; nothing was read."
