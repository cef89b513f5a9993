"""The computers' egress policy, attacked for real: Chromium (the module's executor) behind
its filtering proxy, loopback servers that must stay out of reach, and pages on an allowed
local portal that try to reach them by every road a page has (navigation, 0.0.0.0, an
IPv4-mapped address, a name, a redirect, a frame, a WebSocket, a service worker), plus a
name that resolves differently the second time. Allowances name exact host:port pairs."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor import actions
from executor.control import ControlError
from executor.egress import EgressPolicy, EgressProxy, denied_address
from executor.runtime import Executor
from runs import loop
from runs.services import run_create
from tests.support.portals import Portal, serve_portal
from tests.support.screen import on_executor
from tests.support.tiers import live


@dataclass
class Hidden:
    """A loopback service the browser must never reach: it counts every connection."""

    host: str
    port: int = 0
    connections: int = 0
    requests: list[str] = field(default_factory=list)
    sock: socket.socket | None = None

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"


@pytest.fixture
def hidden() -> Iterator[Hidden]:
    yield from _serve_hidden("127.0.0.1")


def _serve_hidden(host: str, port: int = 0) -> Iterator[Hidden]:
    service = Hidden(host)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(16)
    service.port = sock.getsockname()[1]
    service.sock = sock

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            service.connections += 1
            conn.settimeout(2)
            try:
                line = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
                service.requests.append(line)
                body = b"<title>hidden</title>internal secret"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass
            finally:
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield service
    finally:
        sock.close()


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None], hidden: Hidden) -> Iterator[Portal]:
    """An allowed local portal whose pages lead to the hidden service."""
    with serve_portal() as served:
        allow_egress(served.origin)
        served.away = hidden.origin
        yield served


def navigate(screen: Executor, url: str) -> None:
    on_executor(screen, lambda: actions.navigate(screen.page, url))


def assert_refused(screen: Executor, url: str) -> None:
    with pytest.raises(ControlError) as refused:
        navigate(screen, url)
    assert refused.value.reason == "egress_refused"
    assert "egress policy" in refused.value.message


# --- the deny list ---------------------------------------------------------------------

DENIED = [
    "0.0.0.0", "0.1.2.3", "127.0.0.1", "127.255.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",  # noqa: S104
    "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.100.100.200", "192.0.0.192", "224.0.0.1", "239.1.2.3",
    "255.255.255.255", "198.18.0.1", "::", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:0.0.0.0", "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a9fe:a9fe::1", "::127.0.0.1",
    "2002:ac1f:ffff::1",  # 6to4 of 172.31.255.255, the last address of 172.16.0.0/12
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo (RFC 4380's example: client 192.0.2.45)
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
]
ALLOWED = ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]


@pytest.mark.parametrize("address", DENIED)
def test_non_public_addresses_are_denied_in_every_form(address: str) -> None:
    assert denied_address(ipaddress.ip_address(address))
    assert not EgressPolicy().permits(host=address, address=ipaddress.ip_address(address), port=80)


@pytest.mark.parametrize("address", ALLOWED)
def test_public_unicast_addresses_are_allowed(address: str) -> None:
    assert not denied_address(ipaddress.ip_address(address))


# Every IPv6 form that carries a denied IPv4 address, and the IPv6 ranges outside global unicast.
EMBEDDED_DENIED = [
    "::ffff:0:7f00:1",  # IPv4-translated (RFC 2765/6145) 127.0.0.1
    "::ffff:0:a9fe:a9fe",  # IPv4-translated 169.254.169.254, the metadata address
    "::ffff:0:a00:1",  # IPv4-translated 10.0.0.1
    "::ffff:0:808:808",  # IPv4-translated, even of a public address: ::/8 is not global unicast
    "::808:808",  # IPv4-compatible (deprecated), of a public address too
    "2606:4700::5efe:7f00:1",  # ISATAP interface id carrying 127.0.0.1
    "2606:4700::200:5efe:a9fe:a9fe",  # ISATAP (universal bit set) carrying the metadata address
    "2001:0:808:808::1",  # Teredo, refused whatever its server and client
    "64:ff9b:1::808:808",  # local-use NAT64: its translator is the operator's own
    "4000::1",  # outside 2000::/3, the only range IANA allocates for global unicast
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # SRv6 SIDs (RFC 9602)
]


@pytest.mark.parametrize("address", EMBEDDED_DENIED)
def test_ipv6_forms_embedding_a_denied_ipv4_address_are_denied(address: str) -> None:
    assert denied_address(ipaddress.ip_address(address))
    assert not EgressPolicy().permits(host=address, address=ipaddress.ip_address(address), port=443)


@pytest.mark.parametrize("address", ["2606:4700::5efe:808:808", "2a00:1450:4001:82a::200e"])
def test_a_global_address_whose_isatap_id_carries_a_public_address_is_allowed(address: str) -> None:
    assert not denied_address(ipaddress.ip_address(address))


def test_allowances_are_exact() -> None:
    policy = EgressPolicy.parse(["127.0.0.1:8000", "[::1]:9000", "portal.internal:8443", "10.20.0.0/16"])
    loopback = ipaddress.ip_address("127.0.0.1")
    assert policy.permits(host="127.0.0.1", address=loopback, port=8000)
    assert policy.permits(host="localhost", address=loopback, port=8000), "an address entry matches what a name resolved to"
    assert not policy.permits(host="127.0.0.1", address=loopback, port=8001)
    assert not policy.permits(host="127.0.0.2", address=ipaddress.ip_address("127.0.0.2"), port=8000)
    assert policy.permits(host="::1", address=ipaddress.ip_address("::1"), port=9000)
    assert policy.permits(host="portal.internal", address=ipaddress.ip_address("10.9.9.9"), port=8443)
    assert not policy.permits(host="portal.internal", address=ipaddress.ip_address("10.9.9.9"), port=443)
    assert policy.permits(host="x", address=ipaddress.ip_address("10.20.3.4"), port=1)
    assert not policy.permits(host="x", address=ipaddress.ip_address("10.21.3.4"), port=1)
    assert EgressPolicy.parse(["192.168.1.5"]).networks == (ipaddress.ip_network("192.168.1.5/32"),)
    for bad in ["localhost", "host:0", "host:99999", ":80", "fe80::1:x:80"]:
        with pytest.raises(ValueError):
            EgressPolicy.parse([bad])


def test_an_address_with_a_zone_index_is_denied() -> None:
    """``%eth0`` routes out of one interface, on its link: refused even for an otherwise global address."""
    for address in ("2606:4700:4700::1111%eth0", "2606:4700:4700::1111%2", "fe80::1%eth0"):
        assert denied_address(ipaddress.ip_address(address)), address
        assert not EgressPolicy().permits(host="example.org", address=ipaddress.ip_address(address), port=443)
    assert not denied_address(ipaddress.ip_address("2606:4700:4700::1111"))


def test_every_entry_of_the_allowance_counts_whatever_its_place() -> None:
    """Blank entries (``a,,b``, a trailing comma) are skipped, and an entry after a CIDR, a blank or an
    exact host:port still opens what it names; a CIDR written with host bits opens its network."""
    policy = EgressPolicy.parse(["", "10.1.2.3/24", " ", "127.0.0.1:8000", "fd00::1/64", "portal.internal:8443", ""])
    assert policy.networks == (ipaddress.ip_network("10.1.2.0/24"), ipaddress.ip_network("fd00::/64"))
    assert policy.endpoints == {("127.0.0.1", 8000), ("portal.internal", 8443)}
    assert policy.permits(host="x", address=ipaddress.ip_address("10.1.2.200"), port=80)
    assert not policy.permits(host="x", address=ipaddress.ip_address("10.1.3.1"), port=80)
    assert policy.permits(host="127.0.0.1", address=ipaddress.ip_address("127.0.0.1"), port=8000)
    assert policy.permits(host="x", address=ipaddress.ip_address("fd00::abcd"), port=443)
    assert policy.permits(host="portal.internal", address=ipaddress.ip_address("10.9.9.9"), port=8443)
    assert EgressPolicy.parse(["", " "]) == EgressPolicy()


def test_an_allowance_of_one_ip_version_never_opens_the_other() -> None:
    """``0.0.0.0/0`` opens every IPv4 address, not IPv6 loopback; ``::/0`` opens no IPv4 address."""
    v4_all, v6_all = EgressPolicy.parse(["0.0.0.0/0"]), EgressPolicy.parse(["::/0"])
    assert v4_all.permits(host="10.0.0.1", address=ipaddress.ip_address("10.0.0.1"), port=80)
    assert not v4_all.permits(host="::1", address=ipaddress.ip_address("::1"), port=80)
    assert not v4_all.permits(host="fe80::1", address=ipaddress.ip_address("fe80::1"), port=80)
    assert v6_all.permits(host="::1", address=ipaddress.ip_address("::1"), port=80)
    assert not v6_all.permits(host="127.0.0.1", address=ipaddress.ip_address("127.0.0.1"), port=80)
    assert not v6_all.permits(host="10.0.0.1", address=ipaddress.ip_address("10.0.0.1"), port=80)


# --- Chromium behind the proxy ---------------------------------------------------------


def test_the_agents_navigate_to_loopback_is_a_tool_error_naming_the_policy(
    screen: Executor, account: Account, hidden: Hidden, settings: Any
) -> None:
    settings.RAM_BROWSER_EGRESS_ALLOW = []
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    run = run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "x", "steps": [{"tool": "navigate", "arguments": {"url": hidden.origin + "/admin/"}}]},
        max_model_calls=5,
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    result = run.steps.get(index=0).result
    assert result["isError"] is True
    assert result["code"] == "browser.egress_refused"
    assert result["category"] == "unprocessable"
    assert "egress policy" in result["content"] and "RAM_BROWSER_EGRESS_ALLOW" in result["content"]
    assert hidden.connections == 0


@pytest.mark.parametrize(
    "template",
    ["http://127.0.0.1:{port}/", "http://0.0.0.0:{port}/", "http://[::ffff:127.0.0.1]:{port}/", "http://localhost:{port}/"],
    ids=["loopback", "zero", "ipv4-mapped", "name"],
)
def test_loopback_is_out_of_reach_in_every_spelling(screen: Executor, hidden: Hidden, settings: Any, template: str) -> None:
    settings.RAM_BROWSER_EGRESS_ALLOW = []
    assert_refused(screen, template.format(port=hidden.port))
    assert hidden.connections == 0


def test_an_allowance_opens_exactly_one_host_port(screen: Executor, portal: Portal, hidden: Hidden) -> None:
    navigate(screen, portal.origin + "/welcome")
    assert on_executor(screen, screen.page.title) == "Home"
    assert_refused(screen, hidden.origin + "/")
    assert hidden.connections == 0


def test_a_redirect_to_loopback_is_refused(screen: Executor, portal: Portal, hidden: Hidden) -> None:
    assert_refused(screen, portal.origin + "/redirect-away")
    assert hidden.connections == 0


def test_a_frame_of_loopback_loads_nothing(screen: Executor, portal: Portal, hidden: Hidden) -> None:
    navigate(screen, portal.origin + "/frame-away")
    # Once the frame has finished loading (its error page), its one attempt is over.
    on_executor(screen, lambda: screen.page.frames[-1].wait_for_load_state("load"))
    assert hidden.connections == 0
    assert "internal secret" not in on_executor(screen, lambda: screen.page.frames[-1].content())


def test_a_websocket_to_loopback_never_connects(screen: Executor, portal: Portal, hidden: Hidden) -> None:
    navigate(screen, portal.origin + "/socket-away")
    on_executor(screen, lambda: screen.page.wait_for_function("document.title === 'closed'", timeout=10_000))
    assert hidden.connections == 0


def test_a_service_worker_fetch_to_loopback_is_refused(screen: Executor, portal: Portal, hidden: Hidden) -> None:
    navigate(screen, portal.origin + "/worker-away")
    deadline = time.monotonic() + 15
    while not any(p["path"].startswith("/worker-done") for p in portal.posts):
        assert time.monotonic() < deadline, "the service worker never ran"
        time.sleep(0.2)
    assert hidden.connections == 0


@pytest.mark.live
def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected(allow_egress: Callable[[str], None]) -> None:
    """DNS rebinding: the first answer is an allowed address, any later one is loopback.
    The proxy must connect to the address it checked, so the hidden service sees nothing."""
    hidden_iter = _serve_hidden("127.0.0.1")
    hidden = next(hidden_iter)
    public_iter = _serve_hidden("127.0.0.2", hidden.port)  # stands for the public host
    public = next(public_iter)
    allow_egress(f"127.0.0.2:{public.port}")
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.2"] if len(lookups) == 1 else ["127.0.0.1"]

    async def fetch() -> httpx.Response:
        proxy = EgressProxy(resolve=rebinding)
        address = await proxy.start()
        try:
            async with httpx.AsyncClient(proxy=f"http://{address}", timeout=10) as client:
                return await client.get(f"http://rebind.test:{hidden.port}/")
        finally:
            await proxy.close()

    try:
        response = asyncio.run(fetch())
        assert response.status_code == 200
        assert lookups == ["rebind.test"], "one lookup per connection"
        assert public.connections == 1
        assert hidden.connections == 0
    finally:
        for it in (hidden_iter, public_iter):
            with pytest.raises(StopIteration):
                next(it)


def test_webrtc_sends_no_udp_around_the_proxy(screen: Executor, portal: Portal) -> None:
    """ICE gathering offers no UDP candidate: WebRTC cannot reach a network the proxy would refuse."""
    navigate(screen, portal.origin + "/welcome")

    async def candidates() -> list[str]:
        return list(
            await screen.page.evaluate(
                """async () => {
  const peer = new RTCPeerConnection({iceServers: []});
  peer.createDataChannel('probe');
  const found = [];
  peer.onicecandidate = (event) => { if (event.candidate) found.push(event.candidate.candidate); };
  await peer.setLocalDescription(await peer.createOffer());
  await new Promise((done) => {
    if (peer.iceGatheringState === 'complete') return done();
    peer.onicegatheringstatechange = () => { if (peer.iceGatheringState === 'complete') done(); };
    setTimeout(done, 5000);
  });
  peer.close();
  return found;
}"""
            )
        )

    found = on_executor(screen, candidates)
    assert not [c for c in found if " udp " in c.lower()], found
