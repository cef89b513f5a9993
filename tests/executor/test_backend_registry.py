"""The browser backend registry: one record per backend gives every fact the server and the
executor read (its choice on a computer, its provider, its options model, its Vault secret)."""

from __future__ import annotations

import pydantic
import pytest

from computers.contracts import ComputerBrowserIn
from computers.models import Computer
from executor.backends import DRIVERS, BrowserBackend, LocalBackend, backend_for
from executor.contracts import BACKENDS, BROWSER_BACKENDS, PROVIDER_OF_BACKEND, BrowserSettings, browser_options
from vault_bridge.credentials import browser_vendor_path

pytestmark = pytest.mark.unit


def test_every_record_has_a_driver_a_choice_and_a_provider_the_runs_may_name() -> None:
    assert set(DRIVERS) == set(BROWSER_BACKENDS) == set(BACKENDS)
    assert [value for value, _ in Computer.Backend.choices] == list(BACKENDS)
    providers = set(BrowserSettings.model_fields["provider"].annotation.__args__[0].__args__)  # type: ignore[union-attr]
    for name, kind in BROWSER_BACKENDS.items():
        assert kind.name == name
        assert PROVIDER_OF_BACKEND[name] == kind.provider in providers
        assert kind.description


def test_a_backend_is_built_from_its_records_options_model() -> None:
    assert isinstance(backend_for(backend="local", options={}, secret=None), LocalBackend)
    cdp = backend_for(backend="cdp", options={"endpoint": "ws://127.0.0.1:9/devtools/browser/x"}, secret="t")
    assert isinstance(cdp, BrowserBackend) and not isinstance(cdp, LocalBackend)
    for name, kind in BROWSER_BACKENDS.items():
        with pytest.raises(pydantic.ValidationError):
            browser_options(name, {"no_such_option": 1})
        assert type(browser_options(name, {} if name != "cdp" else {"endpoint": "ws://h:1/x"})) is kind.options
    with pytest.raises(ValueError, match="unknown browser backend"):
        browser_options("nowhere", {})


def test_only_a_backend_whose_record_keeps_a_vault_secret_takes_one() -> None:
    for name, kind in BROWSER_BACKENDS.items():
        options = {"endpoint": "ws://h:1/x"} if name == "cdp" else {}
        if kind.vault_secret:
            assert ComputerBrowserIn(backend=name, options=options, secret="s").secret == "s"
            assert browser_vendor_path(account_id="00000000-0000-0000-0000-000000000001", vendor=name).endswith(name)
        else:
            with pytest.raises(pydantic.ValidationError, match=f"the {name} backend takes no secret"):
                ComputerBrowserIn(backend=name, options=options, secret="s")
    with pytest.raises(pydantic.ValidationError, match="must be one of"):
        ComputerBrowserIn.model_validate({"backend": "nowhere"})
    with pytest.raises(ValueError, match="invalid browser vendor"):
        browser_vendor_path(account_id="00000000-0000-0000-0000-000000000001", vendor="../steel")
