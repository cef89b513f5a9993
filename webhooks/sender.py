"""One HTTP POST to a webhook endpoint under the egress policy of the browsers.

The host is resolved *once*; every address it resolves to must pass the same
address rules as the computers' browsers (``executor.egress``: public unicast
addresses only, unless ``RAM_WEBHOOK_EGRESS_ALLOW`` opens an exception); the
connection goes to a checked address (so a name that resolves elsewhere a
second time reaches nothing new), TLS verifies the certificate against the
URL's host name, and no redirect is followed (a 3xx is a failed attempt).

What goes wrong is described in RAM's own words: never the URL (its query may
hold the receiver's token), a header, or the receiver's body.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

from executor.egress import EgressPolicy

Resolver = Callable[[str, int], list[str]]
RESPONSE_READ_LIMIT = 4096


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status_code: int | None = None
    error: str = ""


@lru_cache(maxsize=16)
def _parsed(entries: tuple[str, ...]) -> EgressPolicy:
    return EgressPolicy.parse(entries)


def configured_policy() -> EgressPolicy:
    """The policy from ``RAM_WEBHOOK_EGRESS_ALLOW`` (read at each attempt, parsed once per value)."""
    return _parsed(tuple(settings.RAM_WEBHOOK_EGRESS_ALLOW))


def system_resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def literal_refused(url: str) -> bool:
    """True when the URL's host is an address literal (or ``localhost``) the policy refuses.

    Names are checked when each attempt resolves them; this catches the obvious at registration.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    policy = configured_policy()
    if host == "localhost" or host.endswith(".localhost"):
        return not policy.permits(host=host, address=ipaddress.ip_address("127.0.0.1"), port=port)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not policy.permits(host=host, address=address, port=port)


def post(
    url: str,
    *,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    policy: EgressPolicy | None = None,
    resolve: Resolver = system_resolve,
) -> Outcome:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    policy = policy if policy is not None else configured_policy()
    try:
        literal = ipaddress.ip_address(host)
        addresses = [literal]
    except ValueError:
        try:
            addresses = [ipaddress.ip_address(a) for a in resolve(host, port)]
        except (OSError, UnicodeError):
            return Outcome(False, error="The endpoint's host name did not resolve.")
    if not addresses:
        return Outcome(False, error="The endpoint's host name did not resolve.")
    if not all(policy.permits(host=host.rstrip("."), address=a, port=port) for a in addresses):
        return Outcome(
            False,
            error="Refused by the egress policy: the endpoint resolves to a non-public address "
            "(RAM_WEBHOOK_EGRESS_ALLOW opens exceptions).",
        )
    sock: socket.socket | None = None
    for address in addresses:
        try:
            sock = socket.create_connection((str(address), port), timeout=timeout)
            break
        except TimeoutError:
            return Outcome(False, error="Connecting to the endpoint timed out.")
        except OSError:
            continue
    if sock is None:
        return Outcome(False, error="The endpoint refused the connection or could not be reached.")
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        if https:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        connection.sock = sock
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(RESPONSE_READ_LIMIT)
        status = response.status
    except ssl.SSLCertVerificationError:
        return Outcome(False, error="The endpoint's TLS certificate could not be verified.")
    except ssl.SSLError:
        return Outcome(False, error="The TLS handshake with the endpoint failed.")
    except TimeoutError:
        return Outcome(False, error=f"The endpoint did not answer within {timeout:g} s.")
    except (OSError, http.client.HTTPException):
        return Outcome(False, error="The connection to the endpoint failed before an answer.")
    finally:
        connection.close()
        sock.close()
    if 200 <= status < 300:
        return Outcome(True, status_code=status)
    if 300 <= status < 400:
        return Outcome(False, status_code=status, error=f"HTTP {status}: redirects are not followed.")
    return Outcome(False, status_code=status, error=f"HTTP {status}.")
