"""Per-computer settings: locale, time zone, user agent, viewport and an upstream proxy.

Set through the account's API and the staff admin; the proxy's credentials in Vault (OpenBao)
only; applied by a real executor's Chromium when its browser starts, read back by loopback
pages; the upstream proxy (a loopback CONNECT proxy that records its tunnels) sits behind the
egress policy, which still refuses what it refused."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pydantic
import pytest
from django.contrib.auth.models import User
from django.test import Client
from PIL import Image
from ram_sdk import RamApiError, RamClient

from accounts.models import Account
from computers.models import Computer
from computers.services import computer_browser_set, computer_profile_reset, computer_reassign
from executor import actions
from executor.contracts import ComputerSettings, computer_settings
from executor.feed import framed
from executor.runtime import Executor, ExecutorThread
from tests.support.screen import on_executor
from tests.support.upstream import Echo, UpstreamProxy, serve_echo, serve_upstream_proxy
from tests.support.vault import VaultServer, proxy_credentials_read_back
from tests.support.vendors import remote_chromium

PROXY_USER = "proxy-user"
PROXY_PASSWORD = "pw-proxy-5f1e9c"  # noqa: S105 - a test credential


def _put(client: Client, key: str, computer_id: str, body: Any, what: str = "settings") -> Any:
    return client.put(
        f"/api/computers/{computer_id}/{what}",
        data=json.dumps(body) if not isinstance(body, str) else body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )


# --- The contract (unit) --------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"locale": "english please"},
        {"locale": "pt_BR"},
        {"locale": 7},
        {"timezone": "Mars/Olympus_Mons"},
        {"timezone": "../../etc/passwd"},
        {"user_agent": "Agent\r\nX-Injected: 1"},
        {"user_agent": ""},
        {"user_agent": "x" * 513},
        {"viewport": {"width": 1281, "height": 720}},
        {"viewport": {"width": 1280, "height": 721}},
        {"viewport": {"width": 319, "height": 600}},
        {"viewport": {"width": 800, "height": 239}},
        {"viewport": {"width": 800.5, "height": 600}},
        {"viewport": {"width": "800", "height": 600}},
        {"viewport": {"width": 800}},
        {"proxy": {"server": "http://user:pw@proxy.example:3128"}},
        {"proxy": {"server": "https://proxy.example:3128"}},
        {"proxy": {"server": "socks5://proxy.example:1080"}},
        {"proxy": {"server": "http://proxy.example"}},
        {"proxy": {"server": "http://proxy.example:3128/path"}},
        {"proxy": {"server": "http://proxy.example:3128?token=x"}},
        {"colour": "blue"},
    ],
)
def test_bad_settings_are_refused_by_the_contract(value: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        computer_settings(value)


def test_good_settings_and_the_viewport_limits_of_the_spec() -> None:
    checked = computer_settings(
        {
            "locale": "pt-BR",
            "timezone": "America/Sao_Paulo",
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) RAM",
            "viewport": {"width": 1280, "height": 720},
            "proxy": {"server": "http://Proxy.Example:3128/"},
        }
    )
    assert checked.viewport_size == (1280, 720)
    assert checked.proxy is not None and checked.proxy.server == "http://proxy.example:3128"
    assert computer_settings({"viewport": {"width": 320, "height": 240}}).viewport_size == (320, 240)
    assert ComputerSettings().viewport_size == (1280, 720)
    assert ComputerSettings().context_options() == {"viewport": {"width": 1280, "height": 720}}


def test_a_smaller_viewports_frame_keeps_the_contracts_size_with_the_page_at_its_corner() -> None:
    shot = io.BytesIO()
    Image.new("RGB", (800, 600), (250, 250, 250)).save(shot, format="JPEG", quality=90)
    frame = Image.open(io.BytesIO(framed(shot.getvalue())))
    assert frame.size == (1280, 720)
    assert min(frame.getpixel((400, 300))) > 200  # the page, where it is on the page
    assert max(frame.getpixel((1000, 650))) < 60  # the background beyond it
    same = io.BytesIO()
    Image.new("RGB", (1280, 720)).save(same, format="JPEG")
    assert framed(same.getvalue()) == same.getvalue()


# --- The account's API (Vault holds the proxy's credentials) ---------------------------------


def test_the_api_sets_the_settings_and_the_proxy_credentials_go_to_vault_only(
    client: Client, vault: VaultServer, account: Account, computer: Computer, runner_key: str
) -> None:
    body = {
        "locale": "pt-BR",
        "timezone": "America/Sao_Paulo",
        "user_agent": "RAM-Test/1.0",
        "viewport": {"width": 1024, "height": 600},
        "proxy": {"server": "http://proxy.example:3128", "username": PROXY_USER, "password": PROXY_PASSWORD},
    }
    response = _put(client, runner_key, computer.id, body)
    assert response.status_code == 200, response.content
    assert response.json()["settings"] == {
        "locale": "pt-BR",
        "timezone": "America/Sao_Paulo",
        "user_agent": "RAM-Test/1.0",
        "viewport": {"width": 1024, "height": 600},
        "proxy": {"server": "http://proxy.example:3128", "credentials": True},
    }
    listed = client.get("/api/computers", headers={"Authorization": f"Bearer {runner_key}"})
    for text in (response.content.decode(), listed.content.decode()):
        assert PROXY_PASSWORD not in text and PROXY_USER not in text
    assert listed.json()["computers"][0]["settings"]["timezone"] == "America/Sao_Paulo"
    computer.refresh_from_db()
    assert PROXY_PASSWORD not in json.dumps(computer.browser_settings)
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) == (PROXY_USER, PROXY_PASSWORD)

    # The same proxy without credentials keeps the stored ones; no proxy deletes them.
    kept = _put(client, runner_key, computer.id, {"proxy": {"server": "http://proxy.example:3128"}})
    assert kept.json()["settings"]["proxy"] == {"server": "http://proxy.example:3128", "credentials": True}
    assert kept.json()["settings"]["locale"] is None  # PUT replaces the whole resource
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) == (PROXY_USER, PROXY_PASSWORD)
    cleared = _put(client, runner_key, computer.id, {})
    assert cleared.json()["settings"] == {"locale": None, "timezone": None, "user_agent": None, "viewport": None, "proxy": None}
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) is None


@pytest.mark.parametrize(
    "body",
    [
        {"viewport": {"width": 1920, "height": 1080}},
        {"viewport": {"width": 100, "height": 100}},
        {"timezone": "Nowhere/Town"},
        {"locale": "not a locale"},
        {"user_agent": "bad\nagent"},
        {"proxy": {"server": "http://u:p@proxy.example:3128"}},
        {"proxy": {"server": "http://proxy.example:3128", "username": "only-user"}},
        {"proxy": {"server": "http://proxy.example:3128", "username": "a:b", "password": "x"}},
        {"proxy": {"server": "ftp://proxy.example:21"}},
        {"extra": True},
        "not json",
    ],
)
def test_a_bad_settings_body_is_a_400_and_changes_nothing(
    client: Client, vault: VaultServer, account: Account, computer: Computer, runner_key: str, body: Any
) -> None:
    good = {"locale": "en-GB", "proxy": {"server": "http://proxy.example:3128", "username": "u1", "password": "p1"}}
    assert _put(client, runner_key, computer.id, good).status_code == 200
    computer.refresh_from_db()
    before = dict(computer.browser_settings)
    response = _put(client, runner_key, computer.id, body)
    assert response.status_code == 400, response.content
    assert set(response.json()) >= {"error"} and isinstance(response.json()["error"], str)
    computer.refresh_from_db()
    assert computer.browser_settings == before
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) == ("u1", "p1")


def test_a_proxy_is_refused_on_a_browser_whose_network_is_not_rams(
    client: Client, vault: VaultServer, computer: Computer, runner_key: str
) -> None:
    computer_browser_set(computer=computer, backend="cdp", options={"endpoint": "ws://127.0.0.1:9/devtools/browser/x"})
    refused = _put(client, runner_key, computer.id, {"proxy": {"server": "http://proxy.example:3128"}})
    assert refused.status_code == 400 and "local backend only" in refused.json()["error"]
    assert set(refused.json()) == {"error"}  # the documented error shape
    # The other settings are fine there.
    assert _put(client, runner_key, computer.id, {"viewport": {"width": 1024, "height": 600}}).status_code == 200
    # And a computer with a proxy cannot move to a remote backend until the proxy is removed.
    computer_browser_set(computer=computer, backend="local", options={})
    assert _put(client, runner_key, computer.id, {"proxy": {"server": "http://proxy.example:3128"}}).status_code == 200
    moved = _put(client, runner_key, computer.id, {"backend": "cdp", "options": {"endpoint": "ws://x:1/"}}, what="browser")
    assert moved.status_code == 400 and "proxy" in moved.json()["error"]
    computer.refresh_from_db()
    assert computer.browser_backend == "local"


def test_another_accounts_computer_is_not_found_and_a_task_observer_key_is_refused(
    client: Client,
    vault: VaultServer,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    runner_key: str,
    observer_key: str,
    computer: Computer,
) -> None:
    other = make_computer(make_account("Other"), "pc-other")
    assert _put(client, runner_key, other.id, {"locale": "fr-FR"}).status_code == 404
    assert _put(client, observer_key, computer.id, {"locale": "fr-FR"}).status_code == 403
    other.refresh_from_db()
    computer.refresh_from_db()
    assert other.browser_settings == {} and computer.browser_settings == {}


def test_moving_a_computer_drops_the_old_owners_proxy_and_its_credentials(
    client: Client, vault: VaultServer, account: Account, computer: Computer, runner_key: str,
    make_account: Callable[..., Account], django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    body = {"locale": "de-DE", "proxy": {"server": "http://proxy.example:3128", "username": "u", "password": "p"}}
    assert _put(client, runner_key, computer.id, body).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        computer_reassign(computer_id=computer.id, account=make_account("New owner"))
    computer.refresh_from_db()
    assert computer.browser_settings == {"locale": "de-DE"}
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) is None


def test_the_python_sdk_sets_the_settings(live_origin: str, vault: VaultServer, account: Account, runner_key: str) -> None:
    Computer.objects.create(id="pc-sdk", account=account)
    with RamClient(live_origin, credential=lambda: runner_key) as ram:
        out = ram.computer_settings_set("pc-sdk", {"locale": "fr-FR", "viewport": {"width": 1024, "height": 640}})
        assert out["settings"]["locale"] == "fr-FR" and out["settings"]["viewport"] == {"width": 1024, "height": 640}
        with pytest.raises(RamApiError) as refused:
            ram.computer_settings_set("pc-sdk", {"viewport": {"width": 1366, "height": 768}})
        assert refused.value.status == 400
    assert Computer.objects.get(pk="pc-sdk").browser_settings == {"locale": "fr-FR", "viewport": {"width": 1024, "height": 640}}


# --- The staff admin ---------------------------------------------------------------------------


@pytest.fixture
def staff_client(db: None, client: Client) -> Client:
    User.objects.create_superuser(username="staff", password="correct horse battery")
    response = client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"})
    assert response.status_code in (302, 303)
    return client


def _admin_form(computer: Computer, **fields: Any) -> dict[str, Any]:
    return {
        "id": computer.id,
        "account": str(computer.account_id),
        "name": computer.name,
        "is_active": "on",
        "browser_backend": computer.browser_backend,
        "browser_options": json.dumps(computer.browser_options),
        **fields,
    }


def test_staff_set_the_settings_and_the_proxy_credentials_never_show_again(
    staff_client: Client, vault: VaultServer, account: Account, computer: Computer
) -> None:
    url = f"/admin/computers/computer/{computer.pk}/change/"
    settings = {"locale": "ja-JP", "timezone": "Asia/Tokyo", "proxy": {"server": "http://proxy.example:8080", "credentials": True}}
    response = staff_client.post(
        url,
        _admin_form(
            computer, computer_settings=json.dumps(settings), proxy_username="staff-user", proxy_password=PROXY_PASSWORD
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    computer.refresh_from_db()
    assert computer.browser_settings == {
        "locale": "ja-JP",
        "timezone": "Asia/Tokyo",
        "proxy": {"server": "http://proxy.example:8080", "credentials": True},
    }
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) == ("staff-user", PROXY_PASSWORD)
    page = staff_client.get(url).content.decode()
    assert "Asia/Tokyo" in page
    assert PROXY_PASSWORD not in page and "staff-user" not in page

    # A form claiming credentials without giving any does not make Vault hold some.
    staff_client.post(url, _admin_form(computer, computer_settings=json.dumps({"proxy": {"server": "http://other.example:1", "credentials": True}})))
    computer.refresh_from_db()
    assert computer.browser_settings == {"proxy": {"server": "http://other.example:1", "credentials": False}}
    assert proxy_credentials_read_back(account_id=account.id, computer_id=computer.id) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"computer_settings": json.dumps({"viewport": {"width": 2000, "height": 720}})},
        {"computer_settings": json.dumps({"timezone": "Atlantis/Capital"})},
        {"computer_settings": json.dumps({"proxy": {"server": "http://proxy.example:1"}}), "proxy_username": "only"},
        {"computer_settings": json.dumps(["not", "an", "object"])},
    ],
)
def test_staff_bad_settings_are_refused_and_change_nothing(
    staff_client: Client, vault: VaultServer, computer: Computer, fields: dict[str, str]
) -> None:
    Computer.objects.filter(pk=computer.pk).update(browser_settings={"locale": "en-US"})
    computer.refresh_from_db()
    response = staff_client.post(f"/admin/computers/computer/{computer.pk}/change/", _admin_form(computer, **fields))
    assert response.status_code == 200  # the form again, with its error
    assert "errorlist" in response.content.decode()
    computer.refresh_from_db()
    assert computer.browser_settings == {"locale": "en-US"}


# --- Live: a real Chromium with the computer's settings ----------------------------------------


@pytest.fixture
def echo(allow_egress: Callable[[str], None]) -> Iterator[Echo]:
    with serve_echo() as served:
        allow_egress(served.origin)
        yield served


@pytest.fixture
def upstream(allow_egress: Callable[[str], None]) -> Iterator[UpstreamProxy]:
    with serve_upstream_proxy(username=PROXY_USER, password=PROXY_PASSWORD) as proxy:
        allow_egress(proxy.address)  # the proxy's own address passes the egress policy too
        yield proxy


@pytest.fixture
def start(transactional_db: None, vault: VaultServer) -> Iterator[Callable[[], Executor]]:
    """The executor of ``pc-1`` as run_executor starts it (its settings read from the row and Vault)."""
    threads: list[ExecutorThread] = []

    def go() -> Executor:
        thread = ExecutorThread(Executor(computer_id="pc-1", register=True, sandbox=False)).start()
        threads.append(thread)
        return thread.executor

    yield go
    for thread in threads:
        thread.stop()


def _echoed(executor: Executor, url: str) -> dict[str, Any]:
    on_executor(executor, lambda: actions.navigate(executor.page, url))
    return dict(json.loads(on_executor(executor, lambda: executor.page.inner_text("#out"))))


def test_each_setting_reaches_the_browser_and_the_proxy_sits_behind_the_egress_policy(
    client: Client, account: Account, computer: Computer, runner_key: str, echo: Echo, upstream: UpstreamProxy,
    start: Callable[[], Executor],
) -> None:  # fmt: skip
    body = {
        "locale": "pt-BR",
        "timezone": "Asia/Tokyo",
        "user_agent": "RAM-Settings-Test/1.0 (X11; Linux x86_64)",
        "viewport": {"width": 800, "height": 600},
        "proxy": {"server": upstream.server, "username": PROXY_USER, "password": PROXY_PASSWORD},
    }
    assert _put(client, runner_key, computer.id, body).status_code == 200
    executor = start()
    seen = _echoed(executor, echo.origin + "/echo")
    assert seen["language"] == "pt-BR"
    assert seen["time_zone"] == "Asia/Tokyo"
    assert seen["user_agent"] == "RAM-Settings-Test/1.0 (X11; Linux x86_64)"
    assert (seen["width"], seen["height"]) == (800, 600)
    # What the page's server received: the same user agent and language, over the upstream proxy.
    assert seen["headers"]["user_agent"] == "RAM-Settings-Test/1.0 (X11; Linux x86_64)"
    assert seen["headers"]["accept_language"].startswith("pt-BR")
    echo_port = echo.origin.rsplit(":", 1)[1]
    assert f"127.0.0.1:{echo_port}" in upstream.targets(), upstream.tunnels
    assert all(t["outcome"] == "tunnel" for t in upstream.tunnels)

    # The screen's frames keep the contract's 1280 × 720, the 800 × 600 page at their corner.
    on_executor(executor, executor.feed.start)
    try:
        deadline = time.monotonic() + 15
        while executor.feed.latest is None:
            assert time.monotonic() < deadline, "no screencast frame"
            time.sleep(0.1)
        frame = Image.open(io.BytesIO(executor.feed.latest.jpeg))
        assert frame.size == (1280, 720)
        assert min(frame.getpixel((400, 300))) > 200  # the echo page's white
        assert max(frame.getpixel((1000, 650))) < 60  # beyond the viewport
    finally:
        on_executor(executor, executor.feed.stop)

    # The egress policy still applies first: a loopback server that is not allowed is refused
    # before anything is asked of the proxy.
    with serve_echo() as elsewhere:
        asked = len(upstream.tunnels)
        with pytest.raises(Exception) as refused:
            on_executor(executor, lambda: actions.navigate(executor.page, elsewhere.origin + "/leak"))
        assert "egress" in str(refused.value).lower()
        assert elsewhere.requests == []
        assert len(upstream.tunnels) == asked
        # A page's request to it from an allowed page is refused too.
        script = f"() => fetch({json.dumps(elsewhere.origin + '/leak')}, {{mode: 'no-cors'}}).then(() => 'done', () => 'failed')"
        on_executor(executor, lambda: actions.navigate(executor.page, echo.origin + "/again"))
        since = time.monotonic()
        on_executor(executor, lambda: executor.page.evaluate(script))
        assert executor.egress.refused_since(since) == elsewhere.origin.removeprefix("http://")
        assert elsewhere.requests == []
        assert len([t for t in upstream.tunnels if t["target"].endswith(elsewhere.origin.rsplit(":", 1)[1])]) == 0
    # No secret in what the executor says about its browser.
    assert PROXY_PASSWORD not in repr(executor.egress.upstream)


def test_a_change_applies_at_the_next_browser_start_and_wrong_proxy_credentials_fail_clearly(
    client: Client, account: Account, computer: Computer, runner_key: str, echo: Echo, upstream: UpstreamProxy,
    start: Callable[[], Executor],
) -> None:  # fmt: skip
    executor = start()
    seen = _echoed(executor, echo.origin + "/default")
    assert (seen["width"], seen["height"]) == (1280, 720)
    assert upstream.tunnels == []  # no proxy: direct (through the egress proxy only)
    default_zone = seen["time_zone"]

    body = {"timezone": "Pacific/Chatham" if default_zone != "Pacific/Chatham" else "Asia/Kolkata",
            "proxy": {"server": upstream.server, "username": PROXY_USER, "password": "wrong"}}  # fmt: skip
    assert _put(client, runner_key, computer.id, body).status_code == 200
    # Not applied to the running browser...
    assert _echoed(executor, echo.origin + "/still")["time_zone"] == default_zone
    # ...but at its next start: a profile reset starts a new browser context with the new settings.
    old_generation = executor.generation
    computer_profile_reset(computer=Computer.objects.get(pk=computer.pk))
    deadline = time.monotonic() + 30
    while executor.generation == old_generation or Computer.objects.get(pk=computer.pk).status != "ready":
        assert time.monotonic() < deadline, "the executor did not start a new generation"
        time.sleep(0.2)
    with pytest.raises(Exception) as failed:
        on_executor(executor, lambda: actions.navigate(executor.page, echo.origin + "/through-a-refusing-proxy"))
    assert "upstream proxy failed" in str(failed.value) and "407" in str(failed.value)
    assert "wrong" not in str(failed.value) and PROXY_USER not in str(failed.value)
    assert [t["outcome"] for t in upstream.tunnels][-1] == "refused"
    assert not any(r["path"] == "/through-a-refusing-proxy" for r in echo.requests)

    body["proxy"] = {"server": upstream.server, "username": PROXY_USER, "password": PROXY_PASSWORD}
    assert _put(client, runner_key, computer.id, body).status_code == 200
    old_generation = executor.generation
    computer_profile_reset(computer=Computer.objects.get(pk=computer.pk))
    deadline = time.monotonic() + 30
    while executor.generation == old_generation or Computer.objects.get(pk=computer.pk).status != "ready":
        assert time.monotonic() < deadline, "the executor did not start a new generation"
        time.sleep(0.2)
    seen = _echoed(executor, echo.origin + "/after-reset")
    assert seen["time_zone"] == body["timezone"]
    assert upstream.tunnels[-1]["outcome"] == "tunnel"


def test_a_cdp_computers_context_gets_the_settings_too(
    client: Client, account: Account, computer: Computer, runner_key: str, echo: Echo, settings: Any,
    start: Callable[[], Executor],
) -> None:  # fmt: skip
    settings.RAM_BROWSER_EGRESS_REMOTE_ACCEPT = True
    with remote_chromium() as chromium:
        computer_browser_set(computer=computer, backend="cdp", options={"endpoint": chromium.ws_url})
        body = {"locale": "de-DE", "timezone": "Europe/Berlin", "user_agent": "RAM-CDP-Test/2.0",
                "viewport": {"width": 1024, "height": 640}}  # fmt: skip
        assert _put(client, runner_key, computer.id, body).status_code == 200
        executor = start()
        assert executor.backend is not None and executor.backend.name == "cdp"
        seen = _echoed(executor, echo.origin + "/cdp")
    assert (seen["language"], seen["time_zone"], seen["user_agent"]) == ("de-DE", "Europe/Berlin", "RAM-CDP-Test/2.0")
    assert (seen["width"], seen["height"]) == (1024, 640)
    assert seen["headers"]["accept_language"].startswith("de-DE")
