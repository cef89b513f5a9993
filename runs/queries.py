"""The run list's query, declared once: ``RunListQuery``.

REST reads its parameters with it (and the OpenAPI document shows each one's values from it), the
MCP ``runs_list`` tool takes its fields as arguments (their schema is the same), and both hand it
to ``selectors.runs_page``, which checks the filters it is sent. The tool's description names the
bounds from here too.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from django.http import QueryDict
from pydantic import Field

from core.api import Query
from core.contracts import COMPUTER_ID_RE, Closed
from runs.errors import InvalidFilter
from runs.models import Run
from runs.pauses import PAUSE_KINDS

LIMIT_MAX = 100
LIMIT_DEFAULT = 20
OFFSET_MAX = 10**9

# Each filter's JSON Schema lists its values (and null: the filter is optional); the selector checks
# them, so a value outside names what it may be.
Status = Annotated[
    str | None, Field(description="the run's status", json_schema_extra={"enum": [*Run.Status.values, None]})
]
Kind = Annotated[str | None, Field(description="open pause kind", json_schema_extra={"enum": [*PAUSE_KINDS, None]})]
ComputerFilter = Annotated[
    str | None,
    Field(description="the assigned computer", json_schema_extra={"pattern": COMPUTER_ID_RE, "maxLength": 128}),
]
Limit = Annotated[int, Field(ge=1, le=LIMIT_MAX, description=f"1-{LIMIT_MAX}, default {LIMIT_DEFAULT}")]
Offset = Annotated[int, Field(ge=0, le=OFFSET_MAX, description="default 0")]


class RunListQuery(Closed):
    """Filters (each optional) and a page of the account's runs, newest first."""

    status: Status = None
    kind: Kind = None
    computer_id: ComputerFilter = None
    limit: Limit = LIMIT_DEFAULT
    offset: Offset = 0

    @classmethod
    def rest_parameters(cls) -> dict[str, str | Query]:
        """The OpenAPI document's query parameters, one per field, with the values each accepts."""
        parameters: dict[str, str | Query] = {}
        for name, field in cls.model_fields.items():
            extra: dict[str, Any] = dict(field.json_schema_extra or {})  # type: ignore[arg-type]
            if field.annotation is int:
                low, high = _bounds(cls, name)
                schema: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
            elif "enum" in extra:
                schema = {"type": "string", "enum": [v for v in extra["enum"] if v is not None]}
            else:
                schema = {"type": "string", **extra}
            parameters[name] = Query(field.description or "", schema)
        return parameters

    @classmethod
    def from_rest(cls, params: QueryDict) -> RunListQuery:
        """The query of ``GET /api/runs``: a filter sent is kept as sent (the selector checks it); a
        page bound that is not an integer within its bounds is refused (400)."""
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = params.get(name)
            if raw is None:
                continue
            if field.annotation is int:
                low, high = _bounds(cls, name)
                if not re.fullmatch(r"[0-9]{1,18}", raw) or not low <= int(raw) <= high:
                    raise InvalidFilter(f"Invalid request: {name} must be an integer from {low} to {high}.")
                values[name] = int(raw)
            else:
                values[name] = raw
        return cls.model_validate(values)

    def page_arguments(self) -> dict[str, Any]:
        """What ``selectors.runs_page`` takes of it."""
        return self.model_dump()


def _bounds(model: type[RunListQuery], name: str) -> tuple[int, int]:
    """An integer field's ``ge`` and ``le``."""
    low = high = None
    for rule in model.model_fields[name].metadata:
        low = getattr(rule, "ge", low)
        high = getattr(rule, "le", high)
    assert low is not None and high is not None  # noqa: S101 - every integer field states both
    return int(low), int(high)


def bounds_words() -> str:
    """How the run list pages, in words (the MCP tool's description)."""
    limit_low, limit_high = _bounds(RunListQuery, "limit")
    return f"Page with limit ({limit_low}-{limit_high}, default {LIMIT_DEFAULT}) and offset; next_offset is null on the last page."
