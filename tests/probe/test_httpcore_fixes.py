"""A fresh HTTP/2 connection sends its request without a hundred event-loop passes first."""

from __future__ import annotations

import asyncio

from httpcore._async import http2

from prober.core.models import Connection, Protocol
from prober.probe.httpcore_fixes import EagerSemaphore
from tests.probe.test_prober import make_prober
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer


async def loop_passes_during_one_request(server: TLSServer, certs: Certs) -> int:
    """How often a task that only yields ran while one `new` HTTP/2 sample was taken."""
    prober = make_prober(server, certs, Protocol.HTTP2, Connection.NEW)
    passes = 0
    done = asyncio.Event()

    async def spin() -> None:
        nonlocal passes
        while not done.is_set():
            passes += 1
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin())
    sample = await prober.sample()
    done.set()
    await spinner
    await prober.aclose()
    assert sample.error is None, sample.detail
    return passes


async def test_the_probe_installs_the_eager_semaphore() -> None:
    assert http2.AsyncSemaphore is EagerSemaphore


async def test_eager_slots_save_a_hundred_loop_passes(
    tls_server: TLSServer, certs: Certs, monkeypatch
) -> None:
    eager = await loop_passes_during_one_request(tls_server, certs)
    from httpcore._synchronization import AsyncSemaphore

    monkeypatch.setattr(http2, "AsyncSemaphore", AsyncSemaphore)
    stock = await loop_passes_during_one_request(tls_server, certs)
    print(f"event-loop passes per new HTTP/2 request: eager {eager}, httpcore's own {stock}")
    assert stock - eager >= 90  # the 99 slot acquisitions each yielded once


async def test_eager_semaphore_keeps_the_bound() -> None:
    slots = EagerSemaphore(2)
    await slots.acquire()
    await slots.acquire()
    blocked = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    assert not blocked.done()
    await slots.release()
    await asyncio.wait_for(blocked, 1)
