"""The delayed-lb scenario's relay (`lab.infra.delayrelay`), as the lab runs it: a process
in front of a real local server, switched by signal. Bytes keep their order whatever the
switch does; while on, an answer comes back no sooner than the delay both ways."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator

import pytest

from prober.lab.infra.delayrelay import release_at

DELAY = 0.2  # seconds each way: a lower bound is asserted, never an upper one


@pytest.mark.parametrize(
    ("read_at", "hold", "previous", "expected"),
    [
        (10.0, 0.0, 0.0, 10.0),  # off: at once
        (10.0, 0.5, 0.0, 10.5),  # on: held
        (10.0, 0.0, 10.5, 10.5),  # switched off behind a held chunk: it does not overtake
        (10.0, 0.5, 10.2, 10.5),
    ],
)
def test_a_chunk_is_released_after_its_hold_and_never_before_the_one_before(
    read_at: float, hold: float, previous: float, expected: float
) -> None:
    assert release_at(read_at, hold, previous) == expected


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


class Relay:
    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process, self.port = process, port

    async def switch(self, on: bool) -> None:
        self.process.send_signal(signal.SIGUSR1 if on else signal.SIGUSR2)
        assert self.process.stdout is not None
        line = json.loads(await asyncio.wait_for(self.process.stdout.readline(), 30))
        assert (line["event"], line["on"]) == ("delay", on)


async def _start(upstream_port: int) -> Relay:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "prober.lab.infra.delayrelay",
        "--upstream", f"127.0.0.1:{upstream_port}", "--delay", str(DELAY),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
    assert line["event"] == "listening"
    return Relay(process, int(line["port"]))


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    started = await _start(server.sockets[0].getsockname()[1])
    yield started
    started.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(started.process.wait(), 30) == 0
    server.close()


async def _round_trip(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, n: int) -> float:
    message = f"{n:08d}".encode() * 512
    sent = time.monotonic()
    writer.write(message)
    await writer.drain()
    assert await reader.readexactly(len(message)) == message
    return time.monotonic() - sent


async def test_bytes_keep_their_order_and_answers_come_late_while_on(relay: Relay) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
    await _round_trip(writer, reader, 0)
    await relay.switch(on=True)
    for n in range(1, 4):  # on a kept connection, each answer held both ways
        assert await _round_trip(writer, reader, n) >= 2 * DELAY
    fresh_reader, fresh_writer = await asyncio.open_connection("127.0.0.1", relay.port)
    assert await _round_trip(fresh_writer, fresh_reader, 9) >= 2 * DELAY  # and on a new one
    # Switched off while chunks are held: they still arrive, in order.
    writer.write(b"a" * 4096)
    await writer.drain()
    await relay.switch(on=False)
    writer.write(b"b" * 4096)
    await writer.drain()
    assert await reader.readexactly(8192) == b"a" * 4096 + b"b" * 4096
    for w in (writer, fresh_writer):
        w.close()


async def test_an_upstream_that_refuses_closes_the_client() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    started = await _start(port)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", started.port)
        with contextlib.suppress(ConnectionResetError):  # an abort may read as a reset
            assert await asyncio.wait_for(reader.read(1), 30) == b""
        writer.close()
    finally:
        started.process.send_signal(signal.SIGTERM)
        await started.process.wait()
