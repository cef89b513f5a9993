"""Named errors of the executors' internal endpoint."""

from __future__ import annotations

from core.errors import Forbidden, NotAuthenticated, NotFound


class ExecutorTokenInvalid(NotAuthenticated):
    code = "executor.token_invalid"
    message_default = "A valid executor token (Authorization: Bearer ram_ex_...) is required."


class ExecutorTokenForeign(Forbidden):
    code = "executor.token_foreign"
    message_default = "This executor token belongs to another computer."


class ExecutorOperationUnknown(NotFound):
    code = "executor.operation_unknown"
    message_default = "No such internal operation."
