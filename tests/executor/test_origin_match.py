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


@pytest.mark.parametrize(
    "text,normal",
    [
        ("http://portal.example", "http://portal.example:80"),
        ("http://portal.example:80/x", "http://portal.example:80"),
        ("https://portal.example", "https://portal.example:443"),
        ("HTTPS://Portal.Example:8443/", "https://portal.example:8443"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
        ("https://[2001:db8::1]/", "https://[2001:db8::1]:443"),
        ("http://127.0.0.1/", "http://127.0.0.1:80"),
    ],
)
def test_the_normal_form_makes_the_default_port_explicit_and_brackets_ipv6(text: str, normal: str) -> None:
    assert normal_origin(text) == normal


@pytest.mark.parametrize(
    "text",
    ["ftp://portal.example/", "file:///etc/passwd", "http:///path", "https://", "http://portal.example:99999/", "http://[::1/", ""],
)
def test_an_odd_or_opaque_origin_has_no_normal_form(text: str) -> None:
    assert normal_origin(text) is None


def test_an_explicit_default_port_is_the_same_origin() -> None:
    assert allowed("http://portal.example/", "http://portal.example:80")
    assert allowed("http://portal.example:80/", "http://portal.example")
    assert allowed("https://portal.example/", "https://portal.example:443")
    assert not allowed("http://portal.example/", "http://portal.example:443")
    assert not allowed("https://portal.example/", "https://portal.example:80")
