"""Hypothesis against the probe boundary. A real TLS server answers with generated
`X-OpenShift-Disruption` values, or with generated raw header bytes, over HTTP/1.1 and
HTTP/2 (h1 header lines and h2 HPACK literals written as they are, unchecked). Whatever
arrives, `Prober.sample()` returns a sample and never raises; the sample says what the header
parser says of the value the client received; and it goes on through the trackers, the
metrics and the event-log codec without an error."""

from __future__ import annotations

import asyncio
import functools
import ssl
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from prober.core.eventlog import decode, encode
from prober.core.header import (
    RESPONSE_HEADER,
    HeaderInvalid,
    format_shutdown_header,
    parse_shutdown_header,
)
from prober.core.models import LB, Connection, ErrorClass, Protocol, Sample, StreamId
from prober.daemon.metrics import Metrics
from prober.daemon.requests.samples import SampleFeed
from prober.probe import Prober, ProbeTarget, client_context
from tests.support.certs import Certs
from tests.support.tls_server import Plan, TLSServer

pytestmark = [pytest.mark.slow]

PATH = "/api/v1/namespaces/default"
FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same examples on every CI run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Go durations the apiserver sends, the grammar's corners, and things that are not one.
ODD_DURATIONS = (
    "0s", "1m10s", "2m9s", "1h2m3.5s", "300ms", "1.5s", "0", "-1s", "1µs", "1μs", ".5s",
    "1.s", "s", "", "9223372036854775807ns", "9223372036854775808ns", "99999999999h",
    "1e3s", "NaNs", "infs", "1h1h1h1h",
)  # fmt: skip
DURATIONS = st.one_of(
    st.integers(0, 10**7).map(lambda n: f"{n}s"),
    st.sampled_from(ODD_DURATIONS),
    st.text(st.characters(codec="latin-1"), max_size=12),
)
HOSTS = st.one_of(
    st.just("apiserver-abcdefghijklmnopqrstuvwxyz"),
    st.text(st.characters(codec="latin-1"), max_size=40),
)
FLAGS = st.one_of(st.sampled_from(["true", "false", "True", "1", ""]), st.text(max_size=6))
STRUCTURED = st.builds(
    "shutdown={} shutdown-delay-duration={} elapsed={} host={}".format,
    FLAGS,
    DURATIONS,
    DURATIONS,
    HOSTS,
).map(lambda text: text.encode("utf-8"))
# Any byte but CR and LF (which would end the h1 header line rather than fill it).
VALUE_BYTES = st.binary(max_size=700).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
VALID = st.builds(
    format_shutdown_header,
    st.booleans(),
    st.floats(0, 1e6),
    st.floats(0, 1e6),
    st.from_regex(r"apiserver-[a-z2-7]{26}", fullmatch=True),
).map(str.encode)
VALUES = st.one_of(VALID, STRUCTURED, VALUE_BYTES)
NAMES = st.one_of(
    st.sampled_from([b"x-openshift-disruption", b"X-OpenShift-Disruption", b"retry-after"]),
    st.binary(max_size=40),
)
RAW_HEADERS = st.lists(st.tuples(NAMES, st.binary(max_size=300)), max_size=12)


@functools.cache
def context(ca_file: str, protocol: Protocol) -> ssl.SSLContext:
    return client_context(ca_file, protocol, verify=True)


def probe_once(certs: Certs, protocol: Protocol, headers: list[tuple[bytes, bytes]]) -> Sample:
    stream = StreamId("kube-api", protocol, LB.INTERNAL, Connection.NEW)

    async def run() -> Sample:
        server = await TLSServer(certs.server, certs.untrusted).start()
        server.plan = Plan(mode="raw", raw_headers=headers)
        # Raw bytes may frame the body wrongly (a stray content-length): then it times out.
        target = ProbeTarget(server.url + PATH, context(certs.ca_file, protocol), timeout=1)
        prober = Prober(stream, target, time.monotonic())
        try:
            return await prober.sample()
        finally:
            await prober.aclose()
            await server.close()

    return asyncio.run(run())


def goes_on(sample: Sample) -> None:
    """Through the codec, the trackers and the metrics, as the daemon's pipeline takes it."""
    assert decode(encode(sample)) == sample
    stream = StreamId.parse(sample.stream)
    metrics = Metrics(CollectorRegistry(), {"platform": "fuzz"}, "0")
    pipeline = SampleFeed([stream], [metrics], wall_start=0.0)
    pipeline.feed(sample)
    final = pipeline.close(sample.end + 60)
    assert final.streams[0].samples == 1
    assert sum(metrics.requests_by_result().values()) == 1


def parsed(value: bytes) -> ErrorClass | None:
    """What the parser says of the value a client keeps: the bytes, less the optional
    whitespace around them, as latin-1 text."""
    try:
        parse_shutdown_header(value.strip(b" \t").decode("latin-1"))
    except HeaderInvalid:
        return ErrorClass.HEADER_INVALID
    return None


@pytest.mark.parametrize("protocol", list(Protocol))
@FUZZ
@given(value=VALUES)
def test_any_disruption_header_value_gives_the_parsers_answer(
    certs: Certs, protocol: Protocol, value: bytes
) -> None:
    sample = probe_once(certs, protocol, [(RESPONSE_HEADER.lower().encode(), value)])
    event(f"result: {sample.error or 'success'}")
    goes_on(sample)
    if sample.status is None:  # the client refused the answer itself (a protocol error)
        allowed = {ErrorClass.OTHER}
        if protocol is Protocol.HTTP1 and b"\n" in value:
            # A line break ends the header line, and the CRLF after it the head: the answer
            # has lost its length, its body never ends, and the client waits out its deadline.
            allowed.add(ErrorClass.TIMEOUT)
        assert sample.error in allowed, sample.detail
        return
    assert sample.status == 200
    assert sample.error is parsed(value), (sample.error, sample.detail)
    assert (sample.shutdown is not None) is (sample.error is None)


@pytest.mark.parametrize("protocol", list(Protocol))
@FUZZ
@given(headers=RAW_HEADERS)
def test_any_raw_header_bytes_give_a_sample(
    certs: Certs, protocol: Protocol, headers: list[tuple[bytes, bytes]]
) -> None:
    sample = probe_once(certs, protocol, headers)
    goes_on(sample)
    assert sample.error is None or isinstance(sample.error, ErrorClass)
    if sample.error is None:
        assert sample.shutdown is not None
