"""The one exception type services raise for refused or illegal transitions."""

from typing import Any

from ramsite.api import ApiError


class ServiceError(ApiError):
    """A transition the caller may not make; views map it to ``{"error": message}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(status, message, **extra)
