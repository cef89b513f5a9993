"""The credential's origin rule as a pure function: exact origins, normalised, never a prefix or a look-alike."""

from __future__ import annotations

import pytest

from executor.login import normal_origin, origin_allowed

pytestmark = pytest.mark.unit


def allowed(page: str, *credential: str) -> bool:
    origins = tuple(o for o in map(normal_origin, credential) if o is not None)
    return origin_allowed(normal_origin(page), origins)


@pytest.mark.parametrize(
    "page,credential",
    [
        ("https://portal.example/login", "https://portal.example"),
        ("https://PORTAL.example:443/x", "https://portal.example"),  # host case and the default port
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("https://b.example/", "https://a.example"),  # any of several
    ],
)
def test_an_exact_origin_is_allowed(page: str, credential: str) -> None:
    assert allowed(page, credential, "https://b.example")


@pytest.mark.parametrize(
    "page,credential",
    [
        ("http://127.0.0.1:8080/", "http://127.0.0.1:80"),  # its normal form is a prefix of the page's
        ("https://portal.example.evil.example/", "https://portal.example"),
        ("https://evil-portal.example/", "https://portal.example"),  # a suffix
        ("http://portal.example/", "https://portal.example"),  # another scheme
        ("https://portal.example:8443/", "https://portal.example"),  # another port
        ("https://sub.portal.example/", "https://portal.example"),
        ("about:blank", "https://portal.example"),
        ("data:text/html,x", "https://portal.example"),
        ("null", "https://portal.example"),
    ],
)
def test_anything_else_is_refused(page: str, credential: str) -> None:
    assert not allowed(page, credential)


def test_an_unreadable_origin_is_refused_even_against_an_empty_list() -> None:
    assert not origin_allowed(None, ())
    assert not origin_allowed(None, ("https://portal.example:443",))
