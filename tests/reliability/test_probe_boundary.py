"""The probe boundary under faults: whatever a server sends, `Prober.sample()` returns a
classified sample and never raises; requests in flight keep their own deadlines when a kept
connection is replaced, and end as recorded samples of class `stopped` when the daemon's stop
cuts them, with the phases they had reached."""

from __future__ import annotations

import asyncio
import time

import pytest

from prober.core.models import LB, Connection, ErrorClass, Protocol, Sample, StreamId
from prober.probe import Prober, ProbeTarget, client_context
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer

PATH = "/api/v1/namespaces/default"


def make_prober(
    server: TLSServer, certs: Certs, protocol: Protocol, connection: Connection, timeout: float
) -> Prober:
    context = client_context(certs.ca_file, protocol, verify=True)
    target = ProbeTarget(server.url + PATH, context, timeout=timeout)
    stream = StreamId("kube-api", protocol, LB.INTERNAL, connection)
    return Prober(stream, target, time.monotonic())


async def staggered_on_a_kept_connection(
    server: TLSServer, certs: Certs, protocol: Protocol, mode: str, *, count: int, gap: float
) -> list[Sample]:
    """One good sample opens the kept connection; then, with the server misbehaving as
    `mode`, `count` samples start `gap` seconds apart so that they overlap on it."""
    prober = make_prober(server, certs, protocol, Connection.REUSED, timeout=0.5)
    assert (await prober.sample()).error is None
    server.plan.mode = mode

    async def later(delay: float) -> Sample:
        await asyncio.sleep(delay)  # staggers the starts; nothing waits on it
        return await prober.sample()

    try:
        return list(await asyncio.gather(*(later(gap * i) for i in range(count))))
    finally:
        await prober.aclose()


async def test_one_timeout_on_a_kept_connection_does_not_fail_the_requests_beside_it(
    tls_server: TLSServer, certs: Certs
) -> None:
    """The first request to time out replaces the kept pool; the others on the old pool must
    meet their own deadlines, not the torn socket (they came back as `tls` errors). Only
    HTTP/2 overlaps requests on its kept connection: a reused HTTP/1.1 worker sends one at a
    time (`tests/daemon/test_reused_stream.py`)."""
    samples = await staggered_on_a_kept_connection(
        tls_server, certs, Protocol.HTTP2, "trickle", count=3, gap=0.1
    )
    assert [(s.error, s.detail) for s in samples] == [
        (ErrorClass.TIMEOUT, "TimeoutError: no answer in time")
    ] * 3
    assert all(s.dur >= 0.5 for s in samples)


@pytest.mark.parametrize("protocol", list(Protocol))
@pytest.mark.parametrize("connection", list(Connection))
async def test_stop_ends_a_request_held_open_as_a_stopped_sample_with_its_phases(
    tls_server: TLSServer, certs: Certs, protocol: Protocol, connection: Connection
) -> None:
    """The server holds the request open; the stop cuts it long before its own deadline: a
    sample of class `stopped` (no failure), not a timeout, saying what had happened."""
    prober = make_prober(tls_server, certs, protocol, connection, timeout=30)
    if connection is Connection.REUSED:
        assert (await prober.sample()).error is None  # the kept connection is up
    tls_server.plan.mode = "stall"
    seen = len(tls_server.requests)
    pending = asyncio.create_task(prober.sample())
    await tls_server.wait_for(lambda s: len(s.requests) == seen + 1)
    prober.stop()
    sample = await asyncio.wait_for(pending, 5)
    await prober.aclose()
    assert (sample.error, sample.detail) == (
        ErrorClass.STOPPED,
        "cut by the daemon's stop: sent, no answer yet",
    )
    assert not sample.failed
    assert sample.stopped
    assert sample.status is None
    assert sample.shutdown is None
    assert sample.dur < 5
    if connection is Connection.NEW:
        assert sample.reused is False
        assert set(sample.phases) == {"connected", "sent"}
        assert 0 <= sample.phases["connected"] <= sample.phases["sent"] <= sample.dur
    else:
        assert sample.reused is True
        assert set(sample.phases) == {"sent"}


async def test_a_request_begun_after_the_stop_is_cut_at_once(
    tls_server: TLSServer, certs: Certs
) -> None:
    """Its task had not run when the stop came (a burst's last request, say): it goes no
    further than its first wait, and is still a sample, never a request left running."""
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.NEW, timeout=30)
    prober.stop()
    sample = await asyncio.wait_for(prober.sample(), 5)
    await prober.aclose()
    assert sample.error is ErrorClass.STOPPED
    assert sample.detail.startswith("cut by the daemon's stop")
    assert "sent" not in sample.phases


async def test_a_settings_flood_breaks_the_connection_for_every_request_on_it(
    tls_server: TLSServer, certs: Certs
) -> None:
    """A server that floods SETTINGS frames and never reads: the client stops after 1000 of
    them (each would cost an acknowledgement) and names the flood for every request on that
    connection, instead of spending its event loop on acknowledgements nobody reads."""
    samples = await staggered_on_a_kept_connection(
        tls_server, certs, Protocol.HTTP2, "settings_flood", count=12, gap=0.03
    )
    assert {s.error for s in samples} == {ErrorClass.OTHER}, [s.detail for s in samples]
    assert all("a flood of more than 1000 SETTINGS and PING" in s.detail for s in samples)


async def test_a_kept_http2_connection_keeps_no_state_per_finished_stream(
    tls_server: TLSServer, certs: Certs
) -> None:
    """A kept connection carries hundreds of thousands of requests over a long run: nothing
    of a finished stream may stay behind (h2's own client kept 65,536 closed stream ids, about
    8 MB a connection)."""
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.REUSED, timeout=5)
    tls_server.keep_requests = False
    for _ in range(700):
        assert (await prober.sample()).error is None
    kept = prober._kept  # white box: the connection's own records
    assert kept is not None
    assert (kept.in_flight, kept._h2.open_streams if kept._h2 else -1) == (0, 0)
    await prober.aclose()
