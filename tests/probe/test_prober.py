"""The probe against a real local TLS server: each stream mode, each error class, the token."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from prober.core.header import ShutdownHeader, format_shutdown_header
from prober.core.models import LB, Connection, ErrorClass, Protocol, Replacement, StreamId
from prober.probe import Prober, ProbeTarget, TokenFile, classify, client_context
from tests.support.certs import Certs
from tests.support.tls_server import HOST_ID, TLSServer

PATH = "/api/v1/namespaces/default"


def stream(protocol: Protocol, connection: Connection) -> StreamId:
    return StreamId("kube-api", protocol, LB.LOCALHOST, connection)


def make_prober(
    server: TLSServer,
    certs: Certs,
    protocol: Protocol = Protocol.HTTP2,
    connection: Connection = Connection.NEW,
    *,
    url: str | None = None,
    token: TokenFile | None = None,
    timeout: float = 2.0,
    verify: bool = True,
) -> Prober:
    context = client_context(certs.ca_file, protocol, verify=verify)
    target = ProbeTarget((url or server.url) + PATH, context, token=token, timeout=timeout)
    return Prober(stream(protocol, connection), target, time.monotonic())


MODES = [(p, c) for p in Protocol for c in Connection]


@pytest.mark.parametrize(("protocol", "connection"), MODES)
async def test_each_mode_does_what_it_says(
    tls_server: TLSServer, certs: Certs, token_file: Path, protocol, connection
) -> None:
    prober = make_prober(tls_server, certs, protocol, connection, token=TokenFile(str(token_file)))
    samples = [await prober.sample() for _ in range(3)]
    await prober.aclose()

    expected_alpn = "h2" if protocol is Protocol.HTTP2 else "http/1.1"
    version = "HTTP/2" if protocol is Protocol.HTTP2 else "HTTP/1.1"
    assert set(tls_server.alpn) == {expected_alpn}
    assert [s.http_version for s in samples] == [version] * 3
    ports = [s.local_port for s in samples]
    if connection is Connection.NEW:
        assert tls_server.connections == 3
        assert [s.reused for s in samples] == [False, False, False]
        assert len(set(ports)) == 3
    else:
        assert tls_server.connections == 1
        assert [s.reused for s in samples] == [False, True, True]
        assert len(set(ports)) == 1
    assert ports == [r.peer_port for r in tls_server.requests]
    assert {s.peer for s in samples} == {f"127.0.0.1:{tls_server.port}"}
    for sample, seen in zip(samples, tls_server.requests, strict=True):
        assert sample.error is None
        assert sample.status == 200
        assert sample.shutdown == ShutdownHeader(False, 70.0, 0.0, HOST_ID)
        assert sample.stream == stream(protocol, connection).name
        assert seen.path == PATH
        assert seen.headers["x-openshift-if-disruption"] == "true"
        assert seen.headers["audit-id"] == sample.audit_id
        assert sample.stream in seen.headers["user-agent"]
        assert seen.headers["authorization"] == "Bearer first-secret-token-7f3a"
    assert len({s.audit_id for s in samples}) == 3
    assert 0 <= samples[0].t < samples[1].t < samples[2].t


def plan(**changes):
    return changes


ERRORS = [
    ("stall", plan(mode="stall"), ErrorClass.TIMEOUT, "no answer in time"),
    ("reset", plan(mode="reset"), ErrorClass.CONNECTION_RESET, "reset by peer"),
    ("close", plan(mode="close"), ErrorClass.CONNECTION_RESET, "closed the connection"),
    ("bad_tls", plan(mode="bad_tls"), ErrorClass.TLS, "CERTIFICATE_VERIFY_FAILED"),
    ("not_tls", plan(mode="not_tls"), ErrorClass.TLS, "WRONG_VERSION_NUMBER"),
    ("429", plan(status=429, retry_after="5"), ErrorClass.RETRY_AFTER, "HTTP 429 Retry-After: 5"),
    ("503", plan(status=503, retry_after="1"), ErrorClass.RETRY_AFTER, "HTTP 503 Retry-After: 1"),
    ("503 bare", plan(status=503), ErrorClass.HTTP_5XX, "HTTP 503"),
    ("500", plan(status=500), ErrorClass.HTTP_5XX, "HTTP 500"),
    ("403", plan(status=403), ErrorClass.HTTP_4XX, "HTTP 403"),
    ("302", plan(status=302), ErrorClass.OTHER, "HTTP 302"),
    ("no header", plan(header=None), ErrorClass.HEADER_MISSING, "without X-OpenShift-Disruption"),
    ("bad header", plan(header="shutdown=maybe"), ErrorClass.HEADER_INVALID, "expected fields"),
]


@pytest.mark.parametrize("protocol", list(Protocol))
@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
async def test_a_misbehaving_server_gives_its_error_class(
    tls_server: TLSServer, certs: Certs, protocol, case
) -> None:
    _, changes, error, detail = case
    for key, value in changes.items():
        setattr(tls_server.plan, key, value)
    prober = make_prober(tls_server, certs, protocol, Connection.NEW, timeout=0.5)
    sample = await prober.sample()
    await prober.aclose()
    assert (sample.error, sample.failed) == (error, error.is_disruption)
    assert detail in sample.detail


@pytest.mark.parametrize("connection", list(Connection))
async def test_a_graceful_goaway_is_met_as_gos_transport_meets_it(
    tls_server: TLSServer, certs: Certs, connection: Connection
) -> None:
    """A stream at or below last_stream_id gets its answer; one above it was never processed
    and is sent again, once, on a new connection; an error GOAWAY is a reset."""
    prober = make_prober(tls_server, certs, Protocol.HTTP2, connection)
    assert (await prober.sample()).error is None
    tls_server.plan.mode = "goaway_answer"
    answered = await prober.sample()
    assert (answered.error, answered.status, answered.retried) == (None, 200, None)
    tls_server.plan.mode = "goaway"  # every stream above last_stream_id, the resent one too
    before = tls_server.connections
    refused = await prober.sample()
    assert (refused.error, refused.retried) == (ErrorClass.GOAWAY, "goaway")
    assert refused.detail.startswith("GOAWAY NO_ERROR last_stream_id=")
    assert "sent again after GOAWAY NO_ERROR" in refused.detail
    assert tls_server.connections == before + 2  # the kept one closed after its answer
    tls_server.plan.mode = "goaway_error"
    torn = await prober.sample()
    assert torn.error is ErrorClass.CONNECTION_RESET
    assert torn.detail.startswith("GOAWAY INTERNAL_ERROR")
    assert torn.retried is None
    tls_server.plan.mode = "ok"
    assert (await prober.sample()).error is None
    await prober.aclose()


async def test_refused_then_dns(tls_server: TLSServer, certs: Certs) -> None:
    prober = make_prober(tls_server, certs)
    await tls_server.refuse()
    sample = await prober.sample()
    assert sample.error is ErrorClass.CONNECT_REFUSED
    assert sample.reused is False
    assert sample.status is None
    await tls_server.accept()
    assert (await prober.sample()).error is None
    lost = make_prober(tls_server, certs, url="https://prober-test.invalid:6443")
    assert (await lost.sample()).error is ErrorClass.DNS


async def test_a_host_name_the_idna_codec_refuses_is_a_dns_failure(
    tls_server: TLSServer, certs: Certs
) -> None:
    """A label over 63 characters (discovery's URL is the cluster's to choose) raised
    UnicodeError out of sample() before; no lookup is made."""
    long_label = make_prober(tls_server, certs, url=f"https://{'a' * 64}.invalid:6443")
    sample = await long_label.sample()
    assert sample.error is ErrorClass.DNS
    assert sample.detail.startswith("bad host name: ")


async def test_a_late_answer_keeps_its_header_whatever_the_status(
    tls_server: TLSServer, certs: Certs
) -> None:
    tls_server.plan.status, tls_server.plan.retry_after = 429, "5"
    tls_server.plan.header = format_shutdown_header(True, 70, 71, HOST_ID)
    sample = await make_prober(tls_server, certs).sample()
    assert sample.error is ErrorClass.RETRY_AFTER
    assert sample.late
    assert sample.shutdown == ShutdownHeader(True, 70, 71, HOST_ID)


async def test_verification_off_accepts_an_untrusted_server(tls_server: TLSServer, certs: Certs):
    tls_server.plan.mode = "bad_tls"
    sample = await make_prober(tls_server, certs, verify=False).sample()
    assert sample.error is None


async def test_a_timed_out_kept_connection_is_replaced(tls_server: TLSServer, certs: Certs):
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.REUSED, timeout=0.3)
    first = await prober.sample()
    assert (first.reused, first.replaced) == (False, Replacement.FIRST)
    tls_server.plan.mode = "stall"
    assert (await prober.sample()).error is ErrorClass.TIMEOUT
    tls_server.plan.mode = "ok"
    after = await prober.sample()
    assert (after.error, after.reused, after.replaced) == (None, False, Replacement.TIMEOUT)
    kept = await prober.sample()
    assert (kept.reused, kept.replaced) == (True, None)
    await prober.aclose()


async def test_each_replacement_of_a_kept_connection_says_why(
    tls_server: TLSServer, certs: Certs
) -> None:
    prober = make_prober(tls_server, certs, Protocol.HTTP1, Connection.REUSED)
    got = [await prober.sample(), await prober.sample()]
    tls_server.plan.close_after = True  # the server answers, then closes the connection
    got.append(await prober.sample())
    tls_server.plan.close_after = False
    got += [await prober.sample(), await prober.sample()]
    tls_server.plan.mode = "stall"
    got.append(await prober.sample())  # times out: the connection is given up
    tls_server.plan.mode = "ok"
    got += [await prober.sample(), await prober.sample()]
    await prober.aclose()
    assert [(s.reused, s.replaced) for s in got] == [
        (False, Replacement.FIRST),
        (True, None),
        (True, None),  # the answer said Connection: close
        (False, Replacement.CLOSED),
        (True, None),
        (True, None),  # timed out
        (False, Replacement.TIMEOUT),
        (True, None),
    ]
    assert got[5].error is ErrorClass.TIMEOUT
    # Each replacement names the kept connection it replaced, by its local port.
    assert [s.replaced_port for s in got if s.replaced] == [
        None,
        got[2].local_port,
        got[5].local_port,
    ]
    assert got[2].local_port != got[3].local_port != got[6].local_port
    # A reused worker's fresh connections are exactly its replacements.
    fresh = [s for s in got if s.reused is False]
    assert tls_server.connections == len(fresh) == len([s for s in got if s.replaced])


@pytest.mark.parametrize("protocol", list(Protocol))
async def test_a_kept_connection_reset_before_its_answer_is_sent_again_once(
    tls_server: TLSServer, certs: Certs, protocol: Protocol
) -> None:
    """As Go's transport: a GET on a kept HTTP/1.1 connection that fails before a byte of the
    answer came is sent again on a new connection; if that fails too, the failure is the
    sample."""
    prober = make_prober(tls_server, certs, protocol, Connection.REUSED)
    assert (await prober.sample()).error is None
    tls_server.plan.mode = "reset"
    reset = await prober.sample()
    tls_server.plan.mode = "ok"
    after = await prober.sample()
    await prober.aclose()
    if protocol is Protocol.HTTP1:
        assert (reset.error, reset.reused) == (ErrorClass.CONNECTION_RESET, False)
        assert reset.retried == "closed_idle"
        assert "sent again after the server closed the kept connection" in reset.detail
    else:  # Go's HTTP/2 transport sends again only what the server refused or never took
        assert (reset.error, reset.reused, reset.retried) == (
            ErrorClass.CONNECTION_RESET,
            True,
            None,
        )
    assert (after.error, after.reused, after.replaced) == (None, False, Replacement.FAILED)


async def test_a_kept_connection_closed_as_a_request_went_out_is_resent_once(
    tls_server: TLSServer, certs: Certs
) -> None:
    """Go's "server closed idle connection": the request was written to a kept connection
    the server closed without a byte of answer; Go's transport sends it again on a new one,
    and so does the probe, saying so. Not a failure: the server never saw it served."""
    prober = make_prober(tls_server, certs, Protocol.HTTP1, Connection.REUSED)
    assert (await prober.sample()).error is None
    tls_server.plan.mode, tls_server.plan.times = "close", 1
    resent = await prober.sample()
    await prober.aclose()
    assert (resent.error, resent.status, resent.retried) == (None, 200, "closed_idle")
    assert (resent.reused, resent.replaced) == (False, Replacement.CLOSED)
    assert resent.detail.startswith("sent again after the server closed the kept connection")
    assert tls_server.connections == 2


async def test_new_connections_stay_new_when_http2_requests_overlap(
    tls_server: TLSServer, certs: Certs
) -> None:
    tls_server.plan.mode = "stall"
    prober = make_prober(tls_server, certs, Protocol.HTTP2, Connection.NEW, timeout=0.5)
    samples = await asyncio.gather(prober.sample(), prober.sample(), prober.sample())
    assert tls_server.connections == 3
    assert [s.reused for s in samples] == [False, False, False]
    assert len({s.local_port for s in samples}) == 3


async def test_a_rotated_token_is_picked_up(
    tls_server: TLSServer, certs: Certs, token_file: Path
) -> None:
    events: list[tuple[str, str]] = []
    token = TokenFile(str(token_file), lambda event, detail: events.append((event, detail)))
    prober = make_prober(tls_server, certs, Protocol.HTTP1, Connection.REUSED, token=token)
    await prober.sample()
    rotated = token_file.with_name("token.new")
    rotated.write_text("second-secret-token-9c1e")
    os.replace(rotated, token_file)  # the kubelet swaps the file atomically
    await prober.sample()
    os.unlink(token_file)
    await prober.sample()  # a vanished file keeps the last token
    auth = [r.headers["authorization"] for r in tls_server.requests]
    assert auth == [
        "Bearer first-secret-token-7f3a",
        "Bearer second-secret-token-9c1e",
        "Bearer second-secret-token-9c1e",
    ]
    assert token.reloads == 1
    assert [e for e, _ in events] == ["token_reloaded", "token_unreadable"]
    assert "secret" not in repr(token) + repr(events)
    await prober.aclose()


def open_sockets_to(port: int) -> int:
    """This process's TCP sockets whose peer is `port` on loopback."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(fd))) as sock:
                count += sock.getpeername()[1:2] == (port,)
        except OSError:  # gone meanwhile, or not a connected socket
            continue
    return count


@pytest.mark.parametrize("protocol", list(Protocol))
async def test_a_request_cut_off_in_the_tls_handshake_closes_its_socket(
    tls_server: TLSServer, certs: Certs, protocol: Protocol
) -> None:
    """The deadline cancels a request that is still in its handshake (the server took the
    TCP connection and never answered the ClientHello); httpcore only closes a socket on
    exceptions, so without the fix each such sample left an open socket behind."""
    tls_server.plan.mode = "silent"
    prober = make_prober(tls_server, certs, protocol, Connection.NEW, timeout=0.2)
    samples = [await prober.sample() for _ in range(3)]
    await prober.aclose()
    assert [s.error for s in samples] == [ErrorClass.TIMEOUT] * 3
    await tls_server.wait_for(lambda server: server.connections == 3)
    assert open_sockets_to(tls_server.port) == 0


@pytest.mark.parametrize(("protocol", "connection"), MODES)
async def test_a_bug_in_pure_code_is_no_network_fault(
    tls_server: TLSServer, certs: Certs, monkeypatch: pytest.MonkeyPatch, protocol, connection
) -> None:
    """The shutdown-header parser raising is a bug: it leaves `sample()` as itself, for the
    scheduler's task to fail and the supervisor to say so and restart it, never as a sample
    of class `other` that would count as disruption."""

    def broken(_raw: bytes) -> ShutdownHeader:
        raise RuntimeError("a bug in the header parser")

    monkeypatch.setattr("prober.probe.classify.parse_shutdown_header", broken)
    prober = make_prober(tls_server, certs, protocol, connection)
    try:
        with pytest.raises(RuntimeError, match="a bug in the header parser"):
            await prober.sample()
    finally:
        await prober.aclose()


@pytest.mark.parametrize("protocol", [Protocol.HTTP1, Protocol.HTTP2])
async def test_a_kept_connection_goes_after_two_samples_raised_on_it(
    tls_server: TLSServer, certs: Certs, monkeypatch: pytest.MonkeyPatch, protocol: Protocol
) -> None:
    """A worker restarted onto the connection its bug met, for ever: 7 requests, 2 samples,
    5 `task_failed` before. After two raises in a row, the next sample opens a new one."""
    calls = {"n": 0}
    real = classify.parse_shutdown_header

    def broken_twice(raw: bytes) -> ShutdownHeader:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise RuntimeError("a bug in the header parser")
        return real(raw)

    monkeypatch.setattr("prober.probe.classify.parse_shutdown_header", broken_twice)
    prober = make_prober(tls_server, certs, protocol, Connection.REUSED)
    try:
        for _ in range(2):
            with pytest.raises(RuntimeError):
                await prober.sample()
        after = await prober.sample()
    finally:
        await prober.aclose()
    assert after.error is None
    assert after.reused is False
    assert after.replaced is Replacement.FAILED
