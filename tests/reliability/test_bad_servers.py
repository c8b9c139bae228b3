"""Servers that misbehave on the wire or in TLS: the daemon keeps sampling every stream,
classifies each request, records every sample it took, and its memory stays bounded.

Each test: the real daemon probes the misbehaving TLS test server (`tests.support.tls_server`)
at 4x the default rate; the server answers normally until the daemon is ready, then plays the
fault until enough requests met it, then answers normally again until every stream recovered.
The server counts every request it received, so its count is held against the daemon's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.models import ErrorClass
from tests.reliability.harness import Account, FaultDaemon, failed_audit_ids
from tests.support.certs import Certs
from tests.support.tls_server import TLSServer

pytestmark = [pytest.mark.slow]

ALL = "http1,http2"
E = ErrorClass


async def through_fault(
    server: TLSServer,
    certs: Certs,
    tmp_path: Path,
    mode: str,
    main: ErrorClass,
    *,
    protocols: str = ALL,
    during: int = 20,
    did: str = "",
) -> Account:
    events = tmp_path / "events.jsonl"
    # Faults that are not timeouts get the default timeout: a loaded machine must not turn
    # a slow answer into a class the fault does not have.
    timeout = "1s" if main is E.TIMEOUT else "5s"
    args = (f"--ca-file={certs.ca_file}", f"--protocols={protocols}", f"--timeout={timeout}")
    async with FaultDaemon(mode, events, [("internal-lb", server.url)], *args) as daemon:
        server.plan.mode = mode
        await daemon.wait_for_total(
            "prober_requests_total", during, f"{mode} to be seen", result=str(main)
        )
        server.plan.mode = "ok"
        before = await daemon.results()
        await daemon.wait_for_total(
            "prober_requests_total", before.get("success", 0) + 40, "recovery", result="success"
        )
        account = await daemon.stop(did)
    seen = {r.headers.get("audit-id") for r in server.requests}
    account.server_seen = len(server.requests)
    account.reached = len(failed_audit_ids(events) & seen)
    return account


# Requests sharing an HTTP/2 connection that is torn down see it closed (or reset, or a
# broken pipe) under them, whatever tore it down.
SHARED_CLOSED = (E.CONNECTION_RESET, ("",))
BAD_SERVERS = [
    # mode, protocols, the class every failed request must get, what its detail says
    ("silent", ALL, E.TIMEOUT, ("no answer in time",)),
    ("trickle", ALL, E.TIMEOUT, ("no answer in time",)),
    ("reset_after_headers", ALL, E.CONNECTION_RESET, ("reset by peer",)),
    ("big_headers", ALL, E.OTHER, ("response head larger than 64 KiB", "header block larger")),
    ("goaway_error", "http2", E.CONNECTION_RESET, ("GOAWAY INTERNAL_ERROR",)),
    ("rst_stream", "http2", E.CONNECTION_RESET, ("RST_STREAM INTERNAL_ERROR",)),
    ("settings_flood", "http2", E.OTHER, ("a flood of more than 1000 SETTINGS and PING",)),
    ("bad_tls", ALL, E.TLS, ("unable to get local issuer certificate",)),
    ("expired_tls", ALL, E.TLS, ("certificate has expired",)),
    ("wrong_name_tls", ALL, E.TLS, ("IP address mismatch",)),
]
DID = {  # what the daemon did, for the table
    "silent": "accepted, never a TLS byte: new connections time out (1 s), kept ones go on",
    "trickle": "one byte a second: the whole-request deadline ends each at 1 s",
    "reset_after_headers": "headers then a TCP RST: connection_reset",
    "big_headers": "1 MB header block: the client stops at 64 KiB (h1 head, h2 block): other",
    "goaway_error": "GOAWAY INTERNAL_ERROR: connection_reset naming the code",
    "rst_stream": "RST_STREAM INTERNAL_ERROR on every stream: connection_reset",
    "settings_flood": "SETTINGS frames without end: the client breaks the connection at 1000",
    "bad_tls": "certificate from another CA: tls on new connections, kept ones go on",
    "expired_tls": "expired certificate: tls on new connections, kept ones go on",
    "wrong_name_tls": "certificate for another name: tls on new connections, kept ones go on",
}


@pytest.mark.parametrize("case", BAD_SERVERS, ids=[b[0] for b in BAD_SERVERS])
async def test_a_bad_server_is_classified_and_nothing_is_lost(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report, case
) -> None:
    mode, protocols, error, words = case
    account = report(
        await through_fault(
            tls_server, certs, tmp_path, mode, error, protocols=protocols, did=DID[mode]
        )
    )
    assert account.failures[str(error)] > 0
    for sample in account.failed:
        expected = [(error, words)]
        if sample.protocol == "http2" and sample.connection == "reused":
            expected.append(SHARED_CLOSED)
        assert any(
            sample.error is e and any(w in sample.detail for w in says) for e, says in expected
        ), (sample.stream, sample.error, sample.detail)
    assert all(n > 0 for n in account.stream_samples.values())
