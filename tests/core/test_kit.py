"""The kit below the apps: named errors with a status at every edge, and
routes declared once for both the URL pattern and the OpenAPI entry."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from django.urls import Resolver404, resolve

import accounts
import runs
import visual
from core.api import REST_STATUS, ROUTERS, openapi_document
from core.contracts import utf16_length
from core.errors import CATEGORIES, DomainError, category_of
from core.pages import PAGE_STATUS
from runs.mcp import MCP_STATUS
from visual.consumers import HANDSHAKE_STATUS


def _named_errors() -> list[type[DomainError]]:
    for package in (accounts, runs, visual):
        for module in pkgutil.iter_modules(package.__path__):
            if module.name == "errors":
                importlib.import_module(f"{package.__name__}.errors")
    found: list[type[DomainError]] = []
    pending = list(DomainError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls not in CATEGORIES:
            found.append(cls)
    return found


def test_every_named_error_has_one_category_a_stable_code_and_a_status_at_every_edge() -> None:
    errors = _named_errors()
    assert len(errors) > 30
    codes = [cls.code for cls in errors]
    assert len(codes) == len(set(codes)), "two errors share a code"
    for cls in errors:
        exc = cls()
        assert category_of(exc) in CATEGORIES
        assert exc.message, cls
        for table in (REST_STATUS, PAGE_STATUS, MCP_STATUS, HANDSHAKE_STATUS):
            assert any(base in table for base in cls.__mro__), f"{cls.__name__} has no status at an edge"


@pytest.mark.parametrize("table", [REST_STATUS, PAGE_STATUS, MCP_STATUS, HANDSHAKE_STATUS])
def test_every_edges_table_is_total_with_no_catch_all(table: dict[type[DomainError], int]) -> None:
    # A catch-all would give any error a status, so a category left out of a table would go unseen.
    assert DomainError not in table
    assert set(CATEGORIES) <= set(table)
    assert all(100 <= status < 600 for status in table.values())


def test_no_status_number_lives_on_an_error() -> None:
    for cls in _named_errors():
        assert not hasattr(cls(), "status"), cls


@pytest.mark.django_db
def test_every_declared_route_is_both_a_url_and_an_openapi_path() -> None:
    document = openapi_document()["paths"]
    declared = [route for router in ROUTERS for route in router.routes]
    assert {r.path for r in declared} == set(document)
    for route in declared:
        concrete = route.path.replace("{run_id}", "00000000-0000-0000-0000-000000000000")
        match = resolve(concrete)
        assert match.func is route.view, route.path
        assert {m.lower() for m in route.operations} == set(document[route.path])
    with pytest.raises(Resolver404):
        resolve("/api/runs/x/y/z")


def test_utf16_length_counts_as_javascript_does() -> None:
    assert utf16_length("a") == 1
    assert utf16_length("é") == 1
    assert utf16_length("😀") == 2
