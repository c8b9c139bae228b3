"""A request that opens its connection times the TCP connect and the TLS handshake apart
(`Sample.connect`, `Sample.tls`, both within `dur`), over a real TLS server; one on a kept
connection has neither."""

from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.models import Connection, Protocol
from prober.probe import TokenFile
from tests.probe.test_prober import make_prober
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer


@pytest.mark.parametrize("protocol", list(Protocol))
async def test_a_new_connection_times_its_connect_and_tls_apart(
    tls_server: TLSServer, certs: Certs, token_file: Path, protocol: Protocol
) -> None:
    fresh = make_prober(
        tls_server, certs, protocol, Connection.NEW, token=TokenFile(str(token_file))
    )
    kept = make_prober(
        tls_server, certs, protocol, Connection.REUSED, token=TokenFile(str(token_file))
    )
    new_samples = [await fresh.sample() for _ in range(2)]
    kept_samples = [await kept.sample() for _ in range(2)]
    for prober in (fresh, kept):
        await prober.aclose()
    for sample in [*new_samples, kept_samples[0]]:  # each opened its connection
        assert sample.error is None
        assert sample.connect is not None
        assert sample.tls is not None
        assert sample.tls > 0  # a handshake is never free
        assert sample.connect >= 0
        assert sample.connect + sample.tls <= sample.dur
    second = kept_samples[1]
    assert (second.reused, second.connect, second.tls) == (True, None, None)


async def test_a_refused_connect_has_no_setup_times(certs: Certs, tls_server: TLSServer) -> None:
    prober = make_prober(tls_server, certs, url="https://127.0.0.1:1")
    sample = await prober.sample()
    await prober.aclose()
    assert sample.error is not None
    assert (sample.connect, sample.tls) == (None, None)
