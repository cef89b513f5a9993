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
    TooMany,
    Unavailable,
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


class StorageFull(Unavailable):
    """The artifacts' storage has no space left (a full disk or quota): nothing was stored."""

    code = "artifact.storage_full"
    message_default = "The server's file storage is full; nothing was stored. Try again later."


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


# --- The computers REST API (computers/api.py) ---


class ComputerUnknown(NotFound):
    """``PUT /api/computers/{id}/browser`` on a computer that is not the account's."""

    code = "computer.unknown"
    message_default = "No such computer in this account."


class BrowserSecretNotStored(Unavailable):
    code = "computer.browser_secret_not_stored"
    message_default = "Vault could not store the secret; nothing was changed. Try again."


class ComputerNotFound(NotFound):
    code = "visual.computer_not_found"
    message_default = "No computer of your account has that id; check GET /api/computers."


class ComputerSettingsRefused(InvalidInput):
    """Settings that do not fit the computer (a proxy on a browser whose network is not RAM's)."""

    code = "computer.settings_refused"


class ComputerIdUsed(Conflict):
    """An id one of the account's computers has, or had before it was deleted (ids are per account)."""

    code = "computer.id_used"
    message_default = "A computer of your account has or had that id; an id is never given twice. Choose another."


class ComputerLimit(TooMany):
    code = "computer.limit"
    message_default = "Your account holds as many computers as it may (RAM_ACCOUNT_MAX_COMPUTERS); delete one first."
