"""The watch connections' TCP keepalive, as client-go's dialer sets it: what ends a watch on a
flow an LB dropped without a word (the kernel path's AWS NLB deletes a target's flows; a
real informer's HTTP/1.1 watch learnt of it some 30 s on, the daemon's never did)."""

from __future__ import annotations

import socket

from prober.core.models import Protocol
from prober.probe.credentials import client_context
from prober.probe.wire.connection import Connection as WireConnection
from prober.probe.wire.dial import KEEPALIVE_PROBES, Endpoint, connect
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer


def options(connection: WireConnection) -> tuple[int, int, int, int]:
    transport = connection._transport  # the socket under it: what the kernel was told
    assert transport is not None
    sock = transport.get_extra_info("socket")
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
    )


async def test_a_connection_keeps_alive_as_gos_dialer_does(
    tls_server: TLSServer, certs: Certs
) -> None:
    context = client_context(certs.ca_file, Protocol.HTTP1, verify=True)
    kept = await connect(Endpoint("127.0.0.1", tls_server.port, context, "localhost", 30.0),
                         [("127.0.0.1", tls_server.port)])  # fmt: skip
    plain = await connect(Endpoint("127.0.0.1", tls_server.port, context, "localhost"),
                          [("127.0.0.1", tls_server.port)])  # fmt: skip
    try:
        assert options(kept) == (1, 30, 30, KEEPALIVE_PROBES)
        assert options(plain)[0] == 0
    finally:
        kept.close()
        plain.close()
