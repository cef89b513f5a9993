"""Named errors of the computer's files (uploads a harness sends)."""

from __future__ import annotations

from core.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType


class UploadInvalid(InvalidInput):
    code = "artifact.invalid"
    message_default = "Invalid upload."


class UploadTooLarge(PayloadTooLarge):
    code = "artifact.too_large"
    message_default = "The file is larger than this server accepts (RAM_UPLOAD_MAX_BYTES)."


class UploadTypeRefused(UnsupportedMediaType):
    code = "artifact.type_refused"
    message_default = "That content type is not accepted for uploads (RAM_UPLOAD_CONTENT_TYPES)."
