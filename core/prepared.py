"""A hot read compiled once per database connection: Django's ORM without building and compiling
the same query again on every request.

``make bench``'s profile of ``GET /api/runs/{id}`` showed about 60 % of the request's Python time
in the ORM building and compiling one query (``select_related`` with two joins and the queue
position's subquery) that is the same on every request but for its two parameters. A
``PreparedGet`` builds and compiles it once for each database connection (a web thread keeps
its connection), with placeholder values; each call puts the real values in their place and
hands the compiled query to Django's own model iterable, so the instances, their related rows
and annotations are exactly those of ``queryset.get(...)``. The query, its joins and its filters
(the account's included) are unchanged: only the work of producing its SQL is saved.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import Field, Model, QuerySet

MAX_ROWS = 2  # like ``get``: a second row is an error, not a choice


class PreparedGet[M: Model]:
    """``build(**values).get()`` for UUID ``values``, compiled once per connection (see the module).

    ``fields`` maps each value's name to the field whose database form it takes (the primary key,
    or the target of a foreign key).
    """

    def __init__(self, build: Callable[..., QuerySet[M]], fields: Callable[[], dict[str, Field[Any, Any]]]) -> None:
        self._build = build
        self._fields = fields
        self._local = threading.local()

    def get(self, **values: uuid.UUID) -> M:
        """The one row, or the model's ``DoesNotExist`` (``MultipleObjectsReturned`` for two)."""
        queryset, compiler, sql, template, slots = self._prepared()
        connection = compiler.connection
        fields = self._fields()
        params = list(template)
        for index, name in slots:
            params[index] = fields[name].get_db_prep_value(values[name], connection)
        bound = tuple(params)
        # The compiler is this thread's own (its connection is): setting its SQL here is not shared.
        compiler.as_sql = lambda *args, **kwargs: (sql, bound)
        clone = queryset.all()  # a fresh result cache over the same compiled query
        rows = list(clone)
        if len(rows) == 1:
            return rows[0]
        model: Any = queryset.model
        if not rows:
            raise model.DoesNotExist(f"{model._meta.object_name} matching query does not exist.")
        raise model.MultipleObjectsReturned(f"get() returned more than one {model._meta.object_name}.")

    def _prepared(self) -> tuple[QuerySet[M], Any, str, tuple[Any, ...], list[tuple[int, str]]]:
        connection = connections["default"]  # this thread's connection
        cached = getattr(self._local, "prepared", None)
        if cached is not None and cached[0] is connection:
            return cached[1]  # type: ignore[no-any-return]
        fields = self._fields()
        placeholders = {name: uuid.UUID(int=n + 1) for n, name in enumerate(sorted(fields))}
        queryset = self._build(**placeholders)
        queryset.query.clear_ordering(force=True)
        queryset.query.set_limits(high=MAX_ROWS)
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        slots: list[tuple[int, str]] = []
        for name, value in placeholders.items():
            prepared = fields[name].get_db_prep_value(value, connection)
            found = [index for index, param in enumerate(params) if param == prepared]
            if len(found) != 1:
                raise RuntimeError(f"the prepared query's {name} is not one parameter")
            slots.append((found[0], name))
        query = queryset.query
        query.get_compiler = lambda *args, **kwargs: compiler  # type: ignore[method-assign]
        prepared_read = (queryset, compiler, sql, tuple(params), slots)
        self._local.prepared = (connection, prepared_read)
        return prepared_read
