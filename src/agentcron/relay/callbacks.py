"""Where the relay may call back: an agent's allowed origins, and no private address.

Two independent rules guard every callback URL (docs/managed-wake.md, "The relay"):

- its origin (`scheme://host[:port]`) must be one the operator allowed for the agent
  (`agentcron relay add-agent NAME --allow-origin URL`, `relay allow-origin NAME URL`);
- every address its host resolves to must be public: loopback, link-local, private,
  unspecified, multicast and reserved addresses are refused unless the operator allowed
  private callbacks (`relay serve --allow-private-callbacks`, `AGENTCRON_RELAY_ALLOW_PRIVATE=1`).

Both are checked when an arm is provisioned and again when it is delivered. At delivery the
address check runs inside the connection itself (`guarded_transport`): the host is resolved
once, every address checked, and the connection made to a checked address, so a DNS answer
that changes between the check and the connect (rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from agentcron.config.relay import ALLOW_PRIVATE_ENV
from agentcron.errors import AgentcronError, InvalidInputError

_DEFAULT_PORTS = {"http": 80, "https": 443}

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) -> the addresses it resolves to (raises OSError when it does not resolve)."""


class CallbackRefusedError(AgentcronError):
    """The relay will not call this URL back (origin not allowed, or a private address). 403."""


class InvalidCallbackError(InvalidInputError):
    """The callback URL cannot be used (not http(s), credentials in it, no host, does not
    resolve). 422.
    """


def origin_of(url: str) -> str:
    """The origin of an http(s) URL, normalized: lower-case scheme and host, the default
    port left out (`HTTPS://Agent.Example.com:443/x` -> `https://agent.example.com`).
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidCallbackError(f"not a usable URL: {url!r} ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidCallbackError(f"only http:// and https:// URLs are called back: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidCallbackError(f"a callback URL carries no user or password: {url!r}")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise InvalidCallbackError(f"the URL has no host: {url!r}")
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def allowed_origin(text: str) -> str:
    """An origin an operator allows, normalized: `scheme://host[:port]`, nothing after it
    (a trailing `/` is accepted). InvalidCallbackError otherwise.
    """
    parts = urlsplit(text.strip())
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidCallbackError(
            f"an allowed origin is scheme://host[:port] only, no path or query: {text!r}"
        )
    return origin_of(text)


def forbidden_reason(address: str) -> str | None:
    """Why the relay must not connect to `address` (an IP), else None."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]  # an IPv6 zone id
    )
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("not globally routable", not ip.is_global),
    )
    for name, hit in checks:
        if hit:
            return f"{name} address {ip}"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass
class CallbackGuard:
    """The address rule, with its resolver (the system's by default)."""

    allow_private: bool = False
    resolve: Resolver = field(default=system_resolver)

    async def addresses(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, each checked; CallbackRefusedError if any is
        forbidden (one bad answer is enough: a client may connect to any of them).
        """
        literal = host.strip("[]")
        try:
            ipaddress.ip_address(literal.split("%", 1)[0])
            found = [literal]
        except ValueError:
            try:
                found = await self.resolve(host, port)
            except OSError as exc:
                raise InvalidCallbackError(f"the host {host!r} does not resolve: {exc}") from None
        if not found:
            raise InvalidCallbackError(f"the host {host!r} resolves to no address")
        if not self.allow_private:
            for address in found:
                reason = forbidden_reason(address)
                if reason is not None:
                    raise CallbackRefusedError(
                        f"the callback host {host!r} resolves to a {reason}: the relay calls "
                        "back public addresses only (an operator allows private ones with "
                        "`agentcron relay serve --allow-private-callbacks` or "
                        f"{ALLOW_PRIVATE_ENV}=1)"
                    )
        return found

    async def check_url(self, url: str) -> None:
        """Resolve the URL's host and check every address (raises; see `addresses`)."""
        if self.allow_private:
            origin_of(url)  # still an http(s) URL with a host
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 80)
        origin_of(url)
        await self.addresses(host, port)


def check_origin(url: str, agent: str, origins: Iterable[str]) -> None:
    """CallbackRefusedError unless the origin of `url` is one of `origins` (the agent's)."""
    origin = origin_of(url)
    allowed = frozenset(origins)
    if origin in allowed:
        return
    if not allowed:
        raise CallbackRefusedError(
            f"agent {agent!r} has no allowed callback origin yet: an operator adds one with "
            f"`agentcron relay allow-origin {agent} {origin}`"
        )
    raise CallbackRefusedError(
        f"the callback origin {origin} is not allowed for agent {agent!r} (allowed: "
        f"{', '.join(sorted(allowed))}); an operator adds it with "
        f"`agentcron relay allow-origin {agent} {origin}`"
    )


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses the guard checked, resolved once for the check and the
    connect (TLS still verifies, and sends SNI for, the host name, not the address).
    """

    def __init__(self, guard: CallbackGuard) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._guard.addresses(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last if last is not None else httpcore.ConnectError(f"cannot connect to {host}")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise CallbackRefusedError("the relay calls back over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose every connection is guarded; no proxy
    from the environment (a proxy would connect for us, unchecked).
    """

    def __init__(self, guard: CallbackGuard) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_GuardedBackend(guard),
        )


def guarded_transport(guard: CallbackGuard) -> httpx.AsyncBaseTransport:
    """The transport of the relay's deliveries."""
    return _GuardedTransport(guard)
