"""A watch server that sends what is no watch event, through the daemon's watch kind: each
watch so fed ends as `bad_event` at its first such line, is counted and listed again after
client-go's backoff, and the daemon lives on and stops cleanly; no bad line is ever taken for
a version of the heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prober.config import load_config
from prober.daemon.app import Daemon
from tests.lab.test_probe_streams import chunk
from tests.support.certs import make_certs
from tests.support.waiting import until

BAD_LINES = [b"not json at all", b'{"type": 5}', b'{"object": []}', b"[1, 2]",
             b'{"type": "ADDED", "object": "x"}', b"\xff\xfe"]  # fmt: skip
pytestmark = pytest.mark.slow

LIST = json.dumps({"kind": "LeaseList", "metadata": {"resourceVersion": "7"}, "items": []})


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Counter) -> None:
    """HTTP/1.1: a LIST of leases answers with a version, a WATCH with one bad line (a new one
    each time) and then silence; anything else (the request streams, the heartbeat) a 200."""
    with contextlib.suppress(OSError, ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            target = head.split(" ", 2)[1]
            length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                           if line.lower().startswith("content-length:")), 0)  # fmt: skip
            if length:
                await reader.readexactly(length)
            if "watch=true" in target:
                seen["watch"] += 1
                bad = BAD_LINES[(seen["watch"] - 1) % len(BAD_LINES)]
                head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                writer.write(head + chunk(bad + b"\n"))
                await writer.drain()
                await reader.read()  # until the client gives up on it
                return
            body = (LIST if "/leases" in target else "{}").encode()
            seen["list" if "/leases" in target else "other"] += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            await writer.drain()


async def test_events_that_do_not_parse_end_the_watch_and_the_daemon_lives(
    tmp_path: Path, token_file: Path
) -> None:
    folder = tempfile.TemporaryDirectory()
    made = make_certs(Path(folder.name))
    seen: Counter[str] = Counter()
    server = await asyncio.start_server(lambda r, w: serve(r, w, seen), "127.0.0.1", 0,
                                        ssl=made.server)  # fmt: skip
    port = server.sockets[0].getsockname()[1]
    log = tmp_path / "events.jsonl"
    config = load_config(env={}, flags={
        "targets": [{"lb": "internal-lb", "url": f"https://localhost:{port}"}],
        "ca_file": str(made.ca_file), "token_file": str(token_file), "protocols": "http1",
        "connections": "reused", "interval": "200ms", "listen": "127.0.0.1:0",
        "event_log": str(log), "heartbeat": "default/prober-test", "heartbeat_interval": "200ms",
        "time_scale": "0.00334",  # client-go's backoff at its floors: 10 ms to 100 ms
        "watches": "list",  # LIST then WATCH: a watch-list's error falls back to a LIST at once
    })  # fmt: skip
    daemon = Daemon(config, install_signals=False)
    task = asyncio.create_task(daemon.run())
    try:
        await asyncio.wait_for(daemon.ready.wait(), 15)
        await until(lambda: seen["watch"] >= 2 * len(BAD_LINES), "every bad line served twice",
                    30)  # fmt: skip
        assert not task.done(), "the daemon lives"
        daemon.stop()
        assert await asyncio.wait_for(task, 15) == 0
    finally:
        server.close()
        folder.cleanup()
    records: list[dict[str, Any]] = [json.loads(x) for x in log.read_text().splitlines()]
    ends = [r for r in records if r.get("kind") == "watch_end"]
    assert len(ends) >= 2 * len(BAD_LINES) - 1
    assert {r["how"] for r in ends} <= {"bad_event", "stopped"}
    assert Counter(r["how"] for r in ends)["bad_event"] >= 2 * len(BAD_LINES) - 1
    # Each end lists again: the reflector's rule for an end it cannot read on from.
    lists = [r for r in records if r.get("kind") == "watch_attempt" and r["step"] == "list"]
    assert len(lists) >= len(ends)
    # The only versions seen are the LISTs' own: never one read off a bad line.
    assert {r["revision"] for r in records if r.get("kind") == "watch_seen"} <= {7}
