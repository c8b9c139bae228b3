"""Every sample says how old its connection was (`Sample.connection_age`), against a real
local TLS server: 0 for the request that opened its connection, the time since that
connection's connect began for a request over a kept one, None where no connection was made."""

from __future__ import annotations

import pytest

from prober.core.models import Connection, ErrorClass, Protocol, Replacement, Sample
from tests.probe.test_prober import MODES, make_prober
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer

CLOCK = 2e-6  # `t` and the age are each rounded to the microsecond


def opened(sample: Sample) -> float:
    """When its connection began its connect, on the run clock."""
    assert sample.connection_age is not None
    return sample.t - sample.connection_age


@pytest.mark.parametrize(("protocol", "connection"), MODES)
async def test_a_kept_connection_ages_and_a_new_one_is_new(
    tls_server: TLSServer, certs: Certs, protocol: Protocol, connection: Connection
) -> None:
    prober = make_prober(tls_server, certs, protocol, connection)
    samples = [await prober.sample() for _ in range(4)]
    await prober.aclose()
    assert [s.error for s in samples] == [None] * 4
    ages = [s.connection_age for s in samples]
    if connection is Connection.NEW:
        assert ages == [0.0] * 4
        return
    assert ages[0] == 0.0
    assert 0 < ages[1] < ages[2] < ages[3]  # type: ignore[operator]
    # One connection: each request's age counts from the first request's own start.
    assert all(abs(opened(s) - samples[0].t) <= CLOCK for s in samples)


async def test_a_replacement_starts_a_new_age(tls_server: TLSServer, certs: Certs) -> None:
    prober = make_prober(tls_server, certs, Protocol.HTTP1, Connection.REUSED)
    first, second = await prober.sample(), await prober.sample()
    tls_server.plan.close_after = True  # answered, then the server closes the connection
    closed = await prober.sample()
    tls_server.plan.close_after = False
    fresh, kept = await prober.sample(), await prober.sample()
    await prober.aclose()
    assert (fresh.replaced, fresh.connection_age) == (Replacement.CLOSED, 0.0)
    assert abs(opened(closed) - first.t) <= CLOCK
    assert abs(opened(second) - first.t) <= CLOCK
    assert kept.connection_age is not None
    assert kept.connection_age > 0
    assert abs(opened(kept) - fresh.t) <= CLOCK


async def test_a_timed_out_request_on_a_kept_connection_has_its_age(
    tls_server: TLSServer, certs: Certs
) -> None:
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.REUSED, timeout=0.3)
    first = await prober.sample()
    tls_server.plan.mode = "stall"
    stalled = await prober.sample()
    await prober.aclose()
    assert stalled.error is ErrorClass.TIMEOUT
    assert stalled.connection_age is not None
    assert stalled.connection_age > 0
    assert abs(opened(stalled) - first.t) <= CLOCK


@pytest.mark.parametrize("protocol", list(Protocol))
async def test_a_reset_kept_connection_says_the_age_of_the_connection_it_met(
    tls_server: TLSServer, certs: Certs, protocol: Protocol
) -> None:
    """HTTP/2: the reset is the sample, on the kept connection, with its age. HTTP/1.1: sent
    again on a new connection, as Go's transport does; `t`, `reused` and the age are the
    resend's, and `replaced_port` names the kept connection it met."""
    prober = make_prober(tls_server, certs, protocol, Connection.REUSED)
    first = await prober.sample()
    tls_server.plan.mode, tls_server.plan.times = "reset", 1
    reset = await prober.sample()
    await prober.aclose()
    if protocol is Protocol.HTTP2:
        assert (reset.error, reset.reused, reset.retried) == (
            ErrorClass.CONNECTION_RESET,
            True,
            None,
        )
        assert abs(opened(reset) - first.t) <= CLOCK
    else:
        assert (reset.error, reset.retried, reset.reused) == (None, "closed_idle", False)
        assert reset.connection_age == 0.0
        assert reset.replaced_port == first.local_port != reset.local_port


async def test_a_request_sent_again_after_goaway_is_as_old_as_its_new_connection(
    tls_server: TLSServer, certs: Certs
) -> None:
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.REUSED)
    first = await prober.sample()
    tls_server.plan.mode, tls_server.plan.times = "goaway", None
    refused = await prober.sample()  # GOAWAY on the kept connection and on the resend's
    tls_server.plan.mode = "ok"
    after = await prober.sample()
    await prober.aclose()
    assert first.connection_age == 0.0
    assert (refused.retried, refused.reused, refused.connection_age) == ("goaway", False, 0.0)
    assert (after.error, after.reused) == (None, False)
    assert after.connection_age == 0.0


async def test_no_connection_no_age(tls_server: TLSServer, certs: Certs) -> None:
    refused = make_prober(tls_server, certs, Protocol.HTTP1, Connection.REUSED)
    await tls_server.refuse()
    sample = await refused.sample()
    await tls_server.accept()
    await refused.aclose()
    assert (sample.error, sample.connection_age) == (ErrorClass.CONNECT_REFUSED, None)
    tls_server.plan.mode = "bad_tls"  # TCP made, TLS refused: the connection never served
    untrusted = make_prober(tls_server, certs, Protocol.HTTP2, Connection.NEW)
    failed = await untrusted.sample()
    await untrusted.aclose()
    assert (failed.error, failed.connection_age) == (ErrorClass.TLS, None)
