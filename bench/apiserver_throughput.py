"""Requests per CPU second of the fake kube-apiserver, against a bare responder on the same
stack, so we know it is never the bottleneck of a lab run.

The server runs in its own process (as in the lab: TLS, audit log and ground-truth file on);
the client is h2load from nghttp2 (C, in another process). For each protocol (HTTP/1.1 and
HTTP/2) we measure reused connections (a few long-lived connections, HTTP/2 with 10 streams
each) and fresh TLS connections (one request per connection). The server's CPU time comes from
/proc/<pid>/stat before and after each run; the figure is requests / server CPU second.

The baseline, measured in the same run with the same client, is a bare responder on the same
asyncio + TLS + h11/h2 stack that answers every request with a fixed body and nothing else: the
ratio says what the apiserver's own logic (routing, headers, audit, truth, lifecycle) costs.

    .venv/bin/python bench/apiserver_throughput.py [--requests N] [--fresh N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import h2.config
import h2.connection
import h2.events
import h11

from prober.lab.infra.certs import LabCA

TOKEN = "bench-token"
PATH = "/api/v1/namespaces/default"
TICKS = os.sysconf("SC_CLK_TCK")
OK_HEADERS = [("Content-Length", "2")]


# -- the baseline: a bare responder on the same stack ----------------------------------------
class BareH1(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn = h11.Connection(h11.SERVER)

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.ConnectionClosed):
                self.transport.close()
                return
            if isinstance(event, h11.EndOfMessage):
                head = h11.Response(status_code=200, headers=OK_HEADERS, reason=b"OK")
                out = self.conn.send(head) + self.conn.send(h11.Data(data=b"ok"))
                self.transport.write(out + self.conn.send(h11.EndOfMessage()))
                self.conn.start_next_cycle()


class BareH2(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.conn.initiate_connection()
        self.transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.StreamEnded):
                headers = [(":status", "200"), ("content-length", "2")]
                self.conn.send_headers(event.stream_id, headers)
                self.conn.send_data(event.stream_id, b"ok", end_stream=True)
        self.transport.write(self.conn.data_to_send())


class BareServer(asyncio.Protocol):
    """Chooses the bare protocol by ALPN, as the apiserver does."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        h2_wanted = ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2"
        self.inner: asyncio.Protocol = BareH2() if h2_wanted else BareH1()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)  # type: ignore[attr-defined]


async def serve_baseline(cert: str, key: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.set_alpn_protocols(["h2", "http/1.1"])
    context.load_cert_chain(cert, key)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(BareServer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"event": "listening", "port": port}), flush=True)
    await asyncio.Event().wait()


# -- measuring -------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def h2load(port: int, h1: bool, requests: int, clients: int, streams: int) -> int:
    command = [
        "h2load", "-n", str(requests), "-c", str(clients), "-m", str(streams),
        "-H", f"authorization: Bearer {TOKEN}", "-H", "x-openshift-if-disruption: true",
        *(["--h1"] if h1 else []), f"https://127.0.0.1:{port}{PATH}",
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    match = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    if match is None:
        raise SystemExit(f"h2load output not understood:\n{out}")
    status = re.search(r"status codes: (\d+) 2xx", out)
    if status is None or int(status.group(1)) != int(match.group(1)):
        raise SystemExit(f"not every request succeeded:\n{out}")
    return int(match.group(1))


def measure(pid: int, port: int, *, h1: bool, fresh: bool, requests: int, fresh_count: int) -> dict:
    before, started = cpu_seconds(pid), time.monotonic()
    if fresh:
        done = sum(h2load(port, h1, 25, 25, 1) for _ in range(fresh_count // 25))
    else:
        done = h2load(port, h1, requests, 4 if not h1 else 8, 1 if h1 else 10)
    cpu, wall = cpu_seconds(pid) - before, time.monotonic() - started
    return {"requests": done, "cpu": cpu, "per_cpu_second": done / cpu, "per_second": done / wall}


def start(command: list[str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, json.loads(line)["port"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000, help="per reused-connection run")
    parser.add_argument("--fresh", type=int, default=1000, help="connections per fresh run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cert = LabCA(directory).issue("server", ["127.0.0.1", "localhost"])
        (directory / "token").write_text(TOKEN + "\n")
        servers = {
            "fake apiserver": [
                sys.executable, "-m", "prober.fakeapiserver", "--port", "0",
                "--cert", str(cert.cert), "--key", str(cert.key), "--hostname", "bench",
                "--token-file", str(directory / "token"),
                "--audit-log", str(directory / "audit.log"), "--truth", str(directory / "t.jsonl"),
            ],
            "bare responder": [
                sys.executable, __file__, "--serve-baseline", str(cert.cert), str(cert.key),
            ],
        }  # fmt: skip
        results: dict[tuple[str, str], dict] = {}
        for name, command in servers.items():
            proc, port = start(command)
            try:
                for label, h1, fresh in (
                    ("h1 reused", True, False),
                    ("h2 reused", False, False),
                    ("h1 fresh TLS", True, True),
                    ("h2 fresh TLS", False, True),
                ):
                    results[(name, label)] = measure(
                        proc.pid, port, h1=h1, fresh=fresh, requests=args.requests,
                        fresh_count=args.fresh,
                    )  # fmt: skip
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"{'case':14} {'server':15} {'requests':>8} {'cpu s':>7} {'req/cpu-s':>10} {'req/s':>8}")
    for (name, label), r in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(
            f"{label:14} {name:15} {r['requests']:8d} {r['cpu']:7.2f}"
            f" {r['per_cpu_second']:10.0f} {r['per_second']:8.0f}"
        )
    print()
    for label in ("h1 reused", "h2 reused", "h1 fresh TLS", "h2 fresh TLS"):
        fake = results[("fake apiserver", label)]["per_cpu_second"]
        bare = results[("bare responder", label)]["per_cpu_second"]
        print(f"{label}: fake apiserver serves {fake:.0f} req per CPU second, "
              f"{fake / bare:.2f}x the bare responder on the same stack ({bare:.0f})")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-baseline":
        asyncio.run(serve_baseline(sys.argv[2], sys.argv[3]))
    else:
        main()
