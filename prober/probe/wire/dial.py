"""Where a probe's connection goes: the target's addresses, and the TCP+TLS connect to the
first that takes one. OSError and ssl.SSLError become `ConnectFailed` here."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import ssl
import time
import typing
from dataclasses import dataclass

from prober.probe.wire.connection import Connection
from prober.probe.wire.errors import ConnectFailed, ConnectFailure, text


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    context: ssl.SSLContext
    server_name: str | None = None  # SNI and the name verified, when not the host
    # TCP keepalive (seconds idle, then between probes, 9 probes), as Go's dialer sets its
    # KeepAlive: client-go's 30 s is what ends a watch on a flow an LB dropped silently.
    keepalive: float | None = None

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


async def resolve(endpoint: Endpoint) -> list[tuple[str, int]]:
    """The addresses to try, in order. An IP literal needs no lookup (nor its thread hop)."""
    try:
        ipaddress.ip_address(endpoint.host)
    except ValueError:
        pass
    else:
        return [(endpoint.host, endpoint.port)]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            endpoint.host, endpoint.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as exc:
        raise ConnectFailed(ConnectFailure.DNS, text(exc)) from None
    except UnicodeError as exc:  # the IDNA codec: a label over 63 characters, an empty one
        raise ConnectFailed(ConnectFailure.DNS, f"bad host name: {exc}") from None
    return [(str(info[4][0]), int(info[4][1])) for info in infos]


async def connect(endpoint: Endpoint, addresses: list[tuple[str, int]]) -> Connection:
    """A connection to the first address that takes one (each tried in turn, as Go's dialer
    does without a fallback delay). The TCP connect and the TLS handshake are two steps, so
    that a sample can tell their times apart: `Connection.tcp_up_at` is when TCP was up."""
    loop = asyncio.get_running_loop()
    failure: ConnectFailed | None = None
    for host, port in addresses:
        protocol = Connection()
        try:
            transport, _ = await loop.create_connection(asyncio.Protocol, host, port)
            tcp_up_at = time.monotonic()
            if endpoint.keepalive:
                _keep_alive(transport.get_extra_info("socket"), endpoint.keepalive)
            tls = await _handshake(loop, transport, protocol, endpoint)
        except (OSError, ssl.SSLError) as exc:
            failure = _connect_failure(exc)
            if failure.kind is not ConnectFailure.REFUSED:
                raise failure from None
            continue
        except asyncio.CancelledError:
            # Cut off (the deadline): asyncio aborts the transport, whose socket closes on the
            # loop's next pass. Let it, so a sample never leaves a socket behind it.
            await asyncio.sleep(0)
            raise
        protocol.tcp_up_at = tcp_up_at
        protocol.connection_made(tls)
        return protocol
    assert failure is not None
    raise failure


async def _handshake(
    loop: asyncio.AbstractEventLoop,
    transport: asyncio.BaseTransport,
    protocol: Connection,
    endpoint: Endpoint,
) -> asyncio.BaseTransport:
    """TLS over the connected `transport`, for `protocol`; the transport is aborted on any
    failure or cut, so that no socket outlives its sample."""
    try:
        tls = await loop.start_tls(
            typing.cast(asyncio.WriteTransport, transport),
            protocol,
            endpoint.context,
            server_hostname=endpoint.server_name or endpoint.host,
            ssl_handshake_timeout=None,  # the probe's own deadline governs
        )
    except BaseException:
        typing.cast(asyncio.WriteTransport, transport).abort()
        raise
    if tls is None:  # pragma: no cover - start_tls returns None only for a closed transport
        raise ConnectFailed(ConnectFailure.RESET, "closed before TLS")
    return tls


KEEPALIVE_PROBES = 9  # Go's, and Linux's default


def _keep_alive(sock: socket.socket, seconds: float) -> None:
    """Keepalive probes after `seconds` idle, then every `seconds`, as Go's dialer does."""
    whole = max(1, round(seconds))  # the kernel counts whole seconds
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, whole)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, whole)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)


def _connect_failure(exc: BaseException) -> ConnectFailed:
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return ConnectFailed(ConnectFailure.RESET, f"closed during TLS: {text(exc)}")
    if isinstance(exc, ssl.SSLError):
        return ConnectFailed(ConnectFailure.TLS, text(exc))
    if isinstance(exc, ConnectionRefusedError):
        return ConnectFailed(ConnectFailure.REFUSED, text(exc))
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return ConnectFailed(ConnectFailure.RESET, f"reset during connect: {text(exc)}")
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return ConnectFailed(ConnectFailure.REFUSED, text(exc))
    return ConnectFailed(ConnectFailure.OTHER, f"{type(exc).__name__}: {text(exc)}")
