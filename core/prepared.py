"""Hot reads compiled once per database connection: Django's ORM without building and compiling
the same query again on every request.

``make bench``'s profile of ``GET /api/runs/{id}`` showed about 60 % of the request's Python time
in the ORM building and compiling one query (``select_related`` with two joins and the queue
position's subquery) that is the same on every request but for its parameters; the run list
spent about 2 ms of its 5 ms there. A ``Prepared`` query is built and compiled once for each
database connection (a web thread keeps its connection) and each *shape* (which filters are
given, the page's bounds), with placeholder values; each call puts the real values in their
place and hands the compiled query to Django's own iterable, so the rows (model instances with
their related rows and annotations, or values) are exactly those the queryset would give. The
query, its joins and its filters (the account's included) are unchanged: only the work of
producing its SQL is saved.
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from django.db import connections
from django.db.models import Field, QuerySet, UUIDField
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

MAX_ROWS_OF_GET = 2  # like ``get``: a second row is an error, not a choice
SHAPES_PER_CONNECTION = 32  # pages of a list differ in their bounds, compiled into the SQL


class Prepared:
    """``build(shape, **values)`` compiled once per connection and shape (see the module).

    ``fields`` maps each value's name to the field whose database form it takes (the field
    filtered on, or the target of a foreign key). ``build`` is called with placeholders.
    """

    def __init__(
        self, build: Callable[..., QuerySet[Any, Any]], fields: Callable[[], dict[str, Field[Any, Any]]]
    ) -> None:
        self._build = build
        self._fields = fields
        self._local = threading.local()

    def rows(self, shape: Hashable = (), **values: Any) -> list[Any]:
        """The query's rows for these ``values`` (every value that is not None filters)."""
        given = {name: value for name, value in values.items() if value is not None}
        queryset, compiler, sql, template, slots = self._prepared(shape, tuple(sorted(given)))
        connection = compiler.connection
        fields = self._fields()
        params = list(template)
        for index, name in slots:
            params[index] = fields[name].get_db_prep_value(given[name], connection)
        bound = tuple(params)
        # The compiler is this thread's own (its connection is): setting its SQL here is not shared.
        compiler.as_sql = lambda *args, **kwargs: (sql, bound)
        shared: Any = queryset  # Django's own attributes of a queryset, not in its stubs
        if shared._prefetch_related_lookups:
            return list(queryset.all())  # a fresh result cache over the same compiled query, then the prefetches
        # Django's own iterable over the compiled query, without cloning the queryset (and its query)
        # for a result cache that is never kept.
        return list(shared._iterable_class(queryset))

    def get(self, **values: Any) -> Any:
        """The one row, or the model's ``DoesNotExist`` (``MultipleObjectsReturned`` for two)."""
        rows = self.rows(("get",), **values)
        if len(rows) == 1:
            return rows[0]
        model: Any = self._model
        if not rows:
            raise model.DoesNotExist(f"{model._meta.object_name} matching query does not exist.")
        raise model.MultipleObjectsReturned(f"get() returned more than one {model._meta.object_name}.")

    def _prepared(self, shape: Hashable, names: tuple[str, ...]) -> tuple[QuerySet[Any, Any], Any, str, tuple[Any, ...], list[tuple[int, str]]]:
        connection = connections["default"]  # this thread's connection
        cache: OrderedDict[Hashable, Any] | None = getattr(self._local, "cache", None)
        if cache is None or getattr(self._local, "connection", None) is not connection:
            cache = self._local.cache = OrderedDict()
            self._local.connection = connection
        key = (shape, names)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]  # type: ignore[no-any-return]
        fields = self._fields()
        placeholders = {
            name: uuid.UUID(int=n + 1) if isinstance(fields[name], UUIDField) else f"\x00prepared {name}"
            for n, name in enumerate(names)
        }
        queryset = self._build(shape, **placeholders)
        if shape == ("get",):
            queryset.query.clear_ordering(force=True)
            queryset.query.set_limits(high=MAX_ROWS_OF_GET)
        self._model = queryset.model
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        slots: list[tuple[int, str]] = []
        for name, value in placeholders.items():
            prepared = fields[name].get_db_prep_value(value, connection)
            found = [index for index, param in enumerate(params) if param == prepared]
            if len(found) != 1:
                raise RuntimeError(f"the prepared query's {name} is not one parameter")
            slots.append((found[0], name))
        queryset.query.get_compiler = lambda *args, **kwargs: compiler  # type: ignore[method-assign]
        compiler.get_converters = _remembered(compiler.get_converters)  # type: ignore[method-assign]
        cache[key] = (queryset, compiler, sql, tuple(params), slots)
        if len(cache) > SHAPES_PER_CONNECTION:
            cache.popitem(last=False)
        return cache[key]  # type: ignore[no-any-return]


def _remembered(get_converters: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``SQLCompiler.get_converters`` remembered for each list of expressions: Django asks for the
    converters of every selected column (the backend's and each field's) on each execution, the
    same for a compiled query whose columns do not change (a quarter of a run read's ORM time).
    The expressions are the compiler's own, kept alive by it, so their ids name them."""
    known: dict[tuple[int, ...], Any] = {}

    def remembered(expressions: Any) -> Any:
        key = tuple(map(id, expressions))
        found = known.get(key)
        if found is None:
            found = known[key] = get_converters(expressions)
        return found

    return remembered


class QuickLoad:
    """A model mixin: rows read from the database become instances without ``Model.__init__``'s
    generic path (Django's documented ``from_db`` hook, overridden).

    ``Model.from_db`` pads a partial row with ``DEFERRED`` markers and calls ``__init__``, which
    sets every field through ``setattr`` (and its descriptors) one by one: for a page of 20 runs
    and their computers, about a tenth of the request's time. Here the row's values go straight
    into the instance's ``__dict__``, which is where ``__init__``'s descriptors put them (a
    foreign key's id included: nothing is cached yet on a new instance); ``pre_init`` and
    ``post_init`` are still sent, and the instance's state is Django's own. A model whose fields
    are not all plain columns behind Django's own attribute descriptors (a file field, a generated
    field) keeps Django's ``from_db``: ``tests/core/test_prepared.py`` compares the two.
    """

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any, *, fetch_mode: Any = None) -> Any:
        if not _quick_loads(cls):
            return super().from_db(db, field_names, values, fetch_mode=fetch_mode)  # type: ignore[misc]
        pre_init.send(sender=cls, args=tuple(values), kwargs={})
        new: Any = cls.__new__(cls)
        new._state = ModelState()
        new.__dict__.update(zip(field_names, values, strict=True))
        post_init.send(sender=cls, instance=new)
        new._state.adding = False
        new._state.db = db
        if fetch_mode is not None:
            new._state.fetch_mode = fetch_mode
        return new


_QUICK: dict[type, bool] = {}


def _quick_loads(cls: type) -> bool:
    """Whether every concrete field of ``cls`` is a column whose attribute is Django's plain one."""
    known = _QUICK.get(cls)
    if known is None:
        meta: Any = cls._meta  # type: ignore[attr-defined]
        known = all(
            not field.generated
            and type(inspect.getattr_static(cls, field.attname, None)) in (DeferredAttribute, ForeignKeyDeferredAttribute)
            for field in meta.concrete_fields
        )
        _QUICK[cls] = known
    return known
