"""The egress policy of the computers' browsers: a filtering forward proxy.

Every request of a computer's Chromium — top-level navigations, redirects,
subresources, frames, WebSockets, service workers — leaves through this proxy,
which the executor runs on a loopback port and gives to Chromium through
Playwright's ``proxy`` launch option (which also makes loopback go through it,
unlike a raw ``--proxy-server``). WebRTC is kept from sending UDP around it.

For each request the proxy resolves the name *once*, checks every address it
got against the policy, and connects to the checked address itself, so a name
that resolves elsewhere a second time (DNS rebinding) reaches nothing new.
By default only public unicast addresses are allowed: loopback, RFC 1918,
link-local, CGNAT, 0.0.0.0/8, unique-local IPv6, multicast, the metadata
addresses and every other non-global range are refused, in every IPv6 form
that carries an IPv4 address too (``denied_address``). ``RAM_BROWSER_EGRESS_ALLOW`` (CIDRs and
exact ``host:port`` entries) opens exceptions.

It speaks HTTP ``CONNECT`` (HTTPS, WebSockets) and plain HTTP requests in
absolute form; a plain HTTP request is forwarded on a connection of its own
and answered with ``Connection: close``, so one client connection never
carries requests for two hosts.

A computer may name an upstream proxy (its settings; credentials from Vault).
The policy is checked first, exactly as without one; then, instead of
connecting to the checked address itself, this proxy connects to the upstream
(whose own address must pass the policy too, so a proxy setting cannot open a
way to loopback or private services) and asks it for a ``CONNECT`` tunnel to
the checked *address* and port — for plain HTTP requests as well — so the
upstream never resolves a name again (no DNS rebinding behind it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import logging
import socket
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

# Refused even where Python would call an address global; the rest is "not is_global".
DENIED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",  # CGNAT (and Alibaba's metadata 100.100.100.200)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local (and the metadata 169.254.169.254)
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF (and Oracle's metadata 192.0.0.192)
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",
        "::/127",
        "fe80::/10",
        "fec0::/10",
        "fc00::/7",  # unique-local (and AWS's metadata fd00:ec2::254)
        "ff00::/8",  # multicast
        "64:ff9b:1::/48",  # local-use NAT64: its translator is the operator's own
        "2001::/32",  # Teredo: refused whatever server and client it carries
        "3fff::/20",  # documentation (RFC 9637; Python 3.12 does not know it yet)
        "100::/64",
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
# The only range IANA allocates for global unicast; everything else (IPv4-compatible ::/96,
# IPv4-translated ::ffff:0:0:0/96, SRv6 5f00::/16, reserved space) is refused.
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
# ISATAP's interface identifier (RFC 5214): 0000:5efe or 0200:5efe, then an IPv4 address.
ISATAP_MASK = 0xFDFF_FFFF
ISATAP_ID = 0x0000_5EFE

HEAD_LIMIT = 64 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 10.0
REFUSED_HEADER = "X-RAM-Egress"
# The header's value on the answer to a request the computer's upstream proxy did not carry.
UPSTREAM_FAILED = "upstream-failed"


def denied_address(address: IPAddress) -> bool:
    """True for every address a browser (or a webhook delivery) may not reach by default.

    An IPv6 address that carries an IPv4 address by a convention a host or router may act on
    gets the IPv4 address's verdict: IPv4-mapped ``::ffff:a.b.c.d`` and well-known NAT64
    ``64:ff9b::a.b.c.d`` (public ones stay reachable: they are how a dual-stack socket and a NAT64
    network reach public IPv4); 6to4 ``2002:AABB:CCDD::`` and an ISATAP interface identifier are
    refused when the address they carry is. Everything outside global unicast ``2000::/3`` is
    refused (IPv4-compatible, IPv4-translated ``::ffff:0:a.b.c.d``), as are Teredo and local-use
    NAT64 whatever they carry.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return True
        mapped = address.ipv4_mapped
        if mapped is not None:
            return denied_address(mapped)
        if address in NAT64:
            return denied_address(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address not in GLOBAL_UNICAST:
            return True
        if address in SIX_TO_FOUR and denied_address(ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)):
            return True
        if (int(address) >> 32) & ISATAP_MASK == ISATAP_ID and denied_address(
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        ):
            return True
    if any(address in network for network in DENIED_NETWORKS if network.version == address.version):
        return True
    return not address.is_global


def _host_port(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` → (host without brackets, lower case; port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 host needs brackets: {text!r}")
    if not host:
        raise ValueError(f"not a host:port: {text!r}")
    return host.lower().rstrip("."), int(port)


def _connect_target(target: str) -> tuple[str, int]:
    """A CONNECT target; some clients send an IPv6 literal without brackets (``::1:443``)."""
    try:
        return _host_port(target)
    except ValueError:
        host, _, port = target.rpartition(":")
        if ":" in host and _address(host) is not None and port.isdigit() and 0 < int(port) < 65536:
            return host.lower(), int(port)
        raise


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True)
class EgressPolicy:
    """Which (host, address, port) the browsers may connect to."""

    networks: tuple[IPNetwork, ...] = ()
    endpoints: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """CIDRs (``10.1.2.0/24``, ``fd00::/8``, a bare address) and exact ``host:port`` entries."""
        networks: list[IPNetwork] = []
        endpoints: set[tuple[str, int]] = set()
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            host, port = _host_port(entry)
            address = _address(host)
            endpoints.add((str(address) if address is not None else host, port))
        return cls(networks=tuple(networks), endpoints=frozenset(endpoints))

    def permits(self, *, host: str, address: IPAddress, port: int) -> bool:
        if (host, port) in self.endpoints or (str(address), port) in self.endpoints:
            return True
        candidates = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        if any(a in network for a in candidates for network in self.networks if network.version == a.version):
            return True
        return not denied_address(address)


@lru_cache(maxsize=16)
def _parsed(entries: tuple[str, ...]) -> EgressPolicy:
    return EgressPolicy.parse(entries)


def configured_policy() -> EgressPolicy:
    """The policy from ``RAM_BROWSER_EGRESS_ALLOW`` (read at each connection, parsed once per value)."""
    return _parsed(tuple(settings.RAM_BROWSER_EGRESS_ALLOW))


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class Refused(Exception):
    def __init__(self, target: str, why: str) -> None:
        super().__init__(f"{target}: {why}")
        self.target = target
        self.why = why


@dataclass(frozen=True)
class Refusal:
    at: float
    target: str


@dataclass(frozen=True)
class Upstream:
    """An upstream HTTP proxy the checked connections go through (a computer's setting)."""

    host: str
    port: int
    username: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def from_server(cls, server: str, *, username: str = "", password: str = "") -> Upstream:
        """``http://host:port`` (checked by executor.contracts.ProxySettings)."""
        parts = urlsplit(server)
        if parts.hostname is None or parts.port is None:
            raise ValueError("an upstream proxy needs a host and a port")
        return cls(host=parts.hostname.lower(), port=parts.port, username=username, password=password)

    def connect_request(self, address: IPAddress, port: int) -> bytes:
        target = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self.username or self.password:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
            lines.append(f"Proxy-Authorization: Basic {token}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


class UpstreamFailed(OSError):
    """The upstream proxy did not open the tunnel (unreachable, refused credentials, an error status)."""


class EgressProxy:
    """The filtering forward proxy of one browser."""

    def __init__(
        self,
        *,
        policy: Callable[[], EgressPolicy] = configured_policy,
        resolve: Resolver = system_resolve,
        host: str = "127.0.0.1",
    ) -> None:
        self.policy = policy
        self.resolve = resolve
        self.host = host
        self.address = ""
        self.server: asyncio.Server | None = None
        self.refusals: deque[Refusal] = deque(maxlen=64)
        self.connections: set[asyncio.Task[None]] = set()
        # The computer's upstream proxy (set before its browser starts); None: direct.
        self.upstream: Upstream | None = None
        # Why the upstream proxy failed lately (no secret: a status code or an error's kind).
        self.upstream_failures: deque[Refusal] = deque(maxlen=64)

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._accept, self.host, 0, limit=HEAD_LIMIT)
        port = self.server.sockets[0].getsockname()[1]
        self.address = f"{self.host}:{port}"
        return self.address

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    def upstream_failed_since(self, since: float) -> str | None:
        """Why the upstream proxy last failed at or after ``since`` (monotonic), if it did."""
        for failure in reversed(self.upstream_failures):
            if failure.at >= since:
                return failure.target
        return None

    def refused_since(self, since: float) -> str | None:
        """The last target refused at or after ``since`` (monotonic), if any."""
        for refusal in reversed(self.refusals):
            if refusal.at >= since:
                return refusal.target
        return None

    async def check(self, host: str, port: int) -> list[IPAddress]:
        """Resolve ``host`` once and check every address (raises ``Refused``); the checked addresses."""
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        literal = _address(host)
        addresses = [host] if literal is not None else await asyncio.wait_for(self.resolve(host, port), CONNECT_SECONDS)
        checked = [ipaddress.ip_address(a) for a in addresses]
        if not checked:
            raise Refused(target, "the name did not resolve")
        policy = self.policy()
        for address in checked:
            if not policy.permits(host=host, address=address, port=port):
                raise Refused(target, "resolves to a non-public address")
        return checked

    async def connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Resolve ``host`` once, check every address, connect to a checked one (through the
        upstream proxy when the computer has one)."""
        checked = await self.check(host, port)
        upstream = self.upstream
        if upstream is not None:
            return await self._through(upstream, checked, port)
        return await self._direct(checked, port)

    @staticmethod
    async def _direct(
        checked: list[IPAddress], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        error: OSError | None = None
        for address in checked:
            try:
                return await asyncio.wait_for(asyncio.open_connection(str(address), port), CONNECT_SECONDS)
            except (OSError, TimeoutError) as exc:
                error = exc if isinstance(exc, OSError) else OSError(str(exc))
        raise error or OSError("no address")

    async def _through(
        self, upstream: Upstream, checked: list[IPAddress], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A tunnel to the first checked address, opened by the upstream proxy (itself checked)."""
        proxy_addresses = await self.check(upstream.host, upstream.port)
        reader, writer = await self._direct(proxy_addresses, upstream.port)
        try:
            writer.write(upstream.connect_request(checked[0], port))
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_SECONDS)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            writer.close()
            raise UpstreamFailed(f"the upstream proxy did not answer ({type(exc).__name__})") from None
        status = head.split(b"\r\n", 1)[0].split(b" ")
        if len(status) < 2 or not status[1].startswith(b"2"):
            writer.close()
            code = status[1].decode("latin-1", "replace")[:3] if len(status) > 1 else "?"
            raise UpstreamFailed(f"the upstream proxy refused the tunnel ({code})")
        return reader, writer

    # --- the protocol -----------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except Exception:  # noqa: BLE001 - one bad connection never stops the proxy
            logger.warning("egress proxy connection failed", exc_info=True)
        finally:
            if task is not None:
                self.connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await _answer(writer, 400, "Bad request.")
            return
        method, target, version = parts
        try:
            if method.upper() == "CONNECT":
                host, port = _connect_target(target)
                upstream = await self.connect(host, port)
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await _splice(reader, writer, *upstream)
                return
            url = urlsplit(target)
            if url.scheme.lower() != "http" or not url.hostname:
                await _answer(writer, 400, "Only absolute http:// requests and CONNECT are proxied.")
                return
            host = url.hostname.lower()
            port = url.port or 80
            # Direct or inside the upstream's tunnel, the request goes in origin form (Host names the site).
            upstream_reader, upstream_writer = await self.connect(host, port)
        except Refused as exc:
            self.refusals.append(Refusal(time.monotonic(), exc.target))
            logger.info("egress refused %s (%s)", exc.target, exc.why)
            await _answer(writer, 403, f"Refused by RAM's browser egress policy: {exc.target} {exc.why}.", refused=True)
            return
        except ValueError:
            await _answer(writer, 400, "Bad request target.")
            return
        except UpstreamFailed as exc:
            self.upstream_failures.append(Refusal(time.monotonic(), str(exc)))
            logger.info("egress upstream proxy failed: %s", exc)
            await _answer(writer, 502, f"The computer's upstream proxy failed: {exc}.", marker=UPSTREAM_FAILED)
            return
        except (OSError, TimeoutError):
            await _answer(writer, 502, "The destination could not be reached.")
            return
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        upstream_writer.write(_rewrite_head(f"{method} {path} {version}", lines[1:]))
        await _splice(reader, writer, upstream_reader, upstream_writer, response_head=True)


def _rewrite_head(first: str, headers: list[str]) -> bytes:
    kept = [
        line
        for line in headers
        if line
        and line.split(":", 1)[0].strip().lower()
        not in ("connection", "keep-alive", "proxy-connection", "proxy-authorization")
    ]
    return ("\r\n".join([first, *kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1")


async def _answer(
    writer: asyncio.StreamWriter, status: int, text: str, *, refused: bool = False, marker: str = ""
) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    marker = "refused" if refused else marker
    extra = f"{REFUSED_HEADER}: {marker}\r\n" if marker else ""
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"Cache-Control: no-store\r\n{extra}Connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _splice(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    *,
    response_head: bool = False,
) -> None:
    """Copy both ways until the upstream side ends (a plain request) or both do (a tunnel)."""

    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter, rewrite: bool) -> None:
        try:
            if rewrite:
                head = await src.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                dst.write(_rewrite_head(lines[0], lines[1:]))
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass

    up = asyncio.create_task(copy(client_reader, upstream_writer, False))
    down = asyncio.create_task(copy(upstream_reader, client_writer, response_head))
    try:
        if response_head:
            # A plain request ends with its response: the client connection is not reused.
            await down
        else:
            await asyncio.gather(up, down)
    finally:
        up.cancel()
        down.cancel()
        with contextlib.suppress(Exception):
            upstream_writer.close()


# The proxy of each browser context, so an action can tell a refusal from another failure.
_PROXIES: weakref.WeakKeyDictionary[object, EgressProxy] = weakref.WeakKeyDictionary()


def attach(context: object, proxy: EgressProxy) -> None:
    _PROXIES[context] = proxy


def proxy_of(context: object) -> EgressProxy | None:
    return _PROXIES.get(context)


# --- Browsers RAM does not launch (cdp, steel, browserbase) -------------------------
# Their network is not RAM's: the proxy cannot carry their connections. What RAM can do
# is check, over CDP, each HTTP(S) request the page makes before it leaves (navigations,
# redirects, frames, subresources) against the same policy, with the executor's own
# resolver. It cannot see WebSocket connections, cannot pin the address the remote
# browser then resolves (DNS rebinding), and cannot stop WebRTC or requests of the
# vendor's own extensions. The executor refuses to start such a backend unless
# ``RAM_BROWSER_EGRESS_REMOTE_ACCEPT`` says the operator accepts this partial policy.

REMOTE_COVERS = "http and https requests of the page, checked over CDP with RAM's resolver before they leave"
REMOTE_MISSES = "WebSockets, WebRTC, DNS rebinding after the check, and the vendor's own traffic"


async def guard_context(context: Any, proxy: EgressProxy) -> None:
    """Check every HTTP(S) request of ``context`` against the policy before it leaves (remote browsers)."""

    async def check(route: Any) -> None:
        url = urlsplit(route.request.url)
        scheme = url.scheme.lower()
        if scheme in ("http", "https") and url.hostname:
            host = url.hostname.lower().rstrip(".")
            try:
                port = url.port or (443 if scheme == "https" else 80)
                await proxy.check(host, port)
            except Refused as exc:
                proxy.refusals.append(Refusal(time.monotonic(), exc.target))
                logger.info("egress refused %s (%s)", exc.target, exc.why)
                if route.request.is_navigation_request():
                    # As the proxy answers: a refusal page, so no error page races the next navigation.
                    await route.fulfill(
                        status=403,
                        content_type="text/plain; charset=utf-8",
                        headers={REFUSED_HEADER: "refused", "Cache-Control": "no-store"},
                        body=f"Refused by RAM's browser egress policy: {exc.target} {exc.why}.\n",
                    )
                else:
                    await route.abort("blockedbyclient")
                return
            except (OSError, TimeoutError, ValueError):
                await route.abort("namenotresolved")
                return
        await route.continue_()

    await context.route("**/*", check)
