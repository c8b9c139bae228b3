"""A TCP relay that holds every chunk it carries, in each direction, for a fixed delay while
it is switched on: an LB that keeps answering, slowly (the `delayed-lb` scenario). The kernel
has no netem, and HAProxy delays only connection setup, not each request on a kept
connection, so the lab stands this in front of one LB's address.

`python -m prober.lab.infra.delayrelay --upstream HOST:PORT --delay SECONDS` runs where the
prober runs (the client's namespace on the kernel path), listens on 127.0.0.1, prints
`{"event": "listening", "port": N}` when ready, and then one line per switch:
`{"event": "delay", "on": bool, "wall": ...}` (the truth of when answers were late).
SIGUSR1 switches the delay on, SIGUSR2 off; SIGTERM stops it.

Each chunk is released `delay` seconds after it was read while on, and never before the chunk
read before it, so that switching off does not let a new chunk overtake a held one: bytes
keep their order, and a connection's answers arrive late, never wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable

CHUNK = 65536
_DONE = b""  # the end of a direction, queued behind its last chunk


class Switch:
    """Whether chunks read now are held, and for how long."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.on = False

    def hold(self) -> float:
        return self.delay if self.on else 0.0


def release_at(read_at: float, hold: float, previous: float) -> float:
    """When a chunk read at `read_at` may be written: `hold` later, never before the one
    before it (`previous`)."""
    return max(read_at + hold, previous)


async def _carry(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, switch: Switch
) -> None:
    """One direction: read chunks as they come, write each at its release time."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def write() -> None:
        while True:
            at, data = await queue.get()
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:  # `_DONE`: the reader saw the end
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    writing = asyncio.create_task(write())
    previous = 0.0
    try:
        while data := await reader.read(CHUNK):
            previous = release_at(loop.time(), switch.hold(), previous)
            queue.put_nowait((previous, data))
        queue.put_nowait((release_at(loop.time(), switch.hold(), previous), _DONE))
        await writing
    except (OSError, asyncio.IncompleteReadError):
        pass  # a reset on either side ends the direction; the other side sees its close
    finally:
        writing.cancel()


async def _relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream: tuple[str, int],
    switch: Switch,
) -> None:
    try:
        up_reader, up_writer = await asyncio.open_connection(*upstream)
    except OSError:
        client_writer.transport.abort()  # as a refused connect through the LB would look
        return
    try:
        await asyncio.gather(
            _carry(client_reader, up_writer, switch), _carry(up_reader, client_writer, switch)
        )
    finally:
        for writer in (client_writer, up_writer):
            writer.transport.abort()


def _say(line: dict[str, object]) -> None:
    print(json.dumps(line), flush=True)


def _switcher(switch: Switch, on: bool) -> Callable[[], None]:
    def flip() -> None:
        if switch.on != on:
            switch.on = on
            _say({"event": "delay", "on": on, "wall": time.time()})

    return flip


async def serve(upstream: tuple[str, int], delay: float) -> None:
    switch = Switch(delay)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, _switcher(switch, True))
    loop.add_signal_handler(signal.SIGUSR2, _switcher(switch, False))
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await asyncio.start_server(lambda r, w: _relay(r, w, upstream, switch), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _say({"event": "listening", "port": port})
    async with server:
        await stop.wait()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prober.lab.infra.delayrelay")
    parser.add_argument("--upstream", type=_address, required=True, help="HOST:PORT to relay to")
    parser.add_argument("--delay", type=float, required=True, help="seconds each chunk waits")
    args = parser.parse_args(argv)
    if args.delay < 0:
        parser.error(f"--delay: cannot be negative: {args.delay}")
    asyncio.run(serve(args.upstream, args.delay))
    sys.exit(0)


if __name__ == "__main__":
    main()
