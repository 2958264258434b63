"""The SSRF guard: a URL from a search result or a redirect must not reach the host's own network.

Checked before every request, the first and each redirect hop: the scheme is http(s), there is a host, and
*every* address the host resolves to is public. A name with one private address among public ones is refused,
since the connection may land on any of them.

Host spellings are not trusted to look like addresses: ``2130706433``, ``0177.0.0.1`` and ``0x7f.1`` all mean
127.0.0.1 to the C library, so anything ``inet_aton`` accepts is treated as that IPv4 literal, and names go
through the running loop's ``getaddrinfo``. IPv6 forms that embed an IPv4 address (mapped ``::ffff:a.b.c.d``,
6to4, Teredo, NAT64 ``64:ff9b::/96``) are judged by the embedded address as well.

A check-then-connect gap remains for DNS names (the name can resolve differently a moment later). The
fetcher closes it for plain http by connecting to the address checked here (``resolve_target``); for https
the certificate check binds the connection to the name, so a rebound name fails the TLS handshake.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

from veracity.fetch.types import FetchError

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


async def check_target(url: str, *, allow_private: bool, allow_loopback: bool = False) -> None:
    """Raise FetchError("refused") unless ``url`` may be fetched; FetchError("connect") when DNS fails.

    ``allow_private`` skips the address checks (scheme and host are still checked); ``allow_loopback`` admits
    loopback addresses only, so a test can fetch a 127.0.0.1 server while private targets stay refused.
    """
    await resolve_target(url, allow_private=allow_private, allow_loopback=allow_loopback)


async def resolve_target(url: str, *, allow_private: bool, allow_loopback: bool = False) -> list[str]:
    """``check_target`` that also returns the checked addresses, in resolver order, to connect to.

    Empty when ``allow_private`` is set (nothing was resolved, so nothing is pinned).
    """
    host, port = _split(url)
    if allow_private:
        return []
    literal = _literal(host)
    addresses = [literal] if literal is not None else await _resolve(host, port)
    for address in addresses:
        if allow_loopback and _is_loopback(address):
            continue
        reason = blocked_reason(address)
        if reason:
            logger.info("refused %s: %s resolves to %s (%s)", url[:200], host, address, reason)
            where = f"{address} is" if literal is not None else f"{host} resolves to {address}, which is"
            raise FetchError("refused", f"{where} {reason}; not fetched")
    return [str(address) for address in addresses]


def _split(url: str) -> tuple[str, int]:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:  # a bad port or an unbalanced IPv6 bracket
        raise FetchError("refused", f"malformed URL: {url[:200]}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError("refused", f"only http and https URLs are fetched, not {scheme or 'a relative URL'}")
    if not parts.hostname:
        raise FetchError("refused", f"the URL has no host: {url[:200]}")
    return parts.hostname, port or (443 if scheme == "https" else 80)


def _literal(host: str) -> IPAddress | None:
    """The address ``host`` spells directly, in any form the C library would accept; None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchError("connect", f"cannot resolve {host}: {exc}") from exc
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise FetchError("connect", f"{host} has no addresses")
    return addresses


def _is_loopback(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _embedded(address: IPAddress) -> list[IPAddress]:
    """The address itself plus any IPv4 address carried inside an IPv6 one."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        found += [v4 for v4 in (address.ipv4_mapped, address.sixtofour) if v4 is not None]
        if address.teredo is not None:
            found += list(address.teredo)
        if address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def blocked_reason(address: IPAddress) -> str | None:
    """Why ``address`` must not be fetched ("private", "loopback", …), or None when it is public."""
    for candidate in _embedded(address):
        for reason, flag in (
            ("loopback", candidate.is_loopback),
            ("link-local", candidate.is_link_local),
            ("unspecified", candidate.is_unspecified),
            ("multicast", candidate.is_multicast),
            ("private", candidate.is_private),
            ("reserved", candidate.is_reserved),
            ("non-global", not candidate.is_global),
        ):
            if flag:
                return reason
    return None
