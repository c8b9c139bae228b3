"""The shutdown response header: upstream vectors, what the apiserver can send, and garbage."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prober.core.header import (
    MAX_VALUE_LENGTH,
    RESPONSE_HEADER,
    HeaderInvalid,
    ShutdownHeader,
    apiserver_id,
    find_header,
    format_shutdown_header,
    parse_shutdown_header,
)

HOST_ID = "apiserver-abcdefghijklmnopqrstuvwxyz"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # openshift/kubernetes with_early_late_annotations_test.go
        (
            "shutdown=false shutdown-delay-duration=10s elapsed=0s host=foo",
            ShutdownHeader(False, 10.0, 0.0, "foo"),
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20s host=foo",
            ShutdownHeader(True, 10.0, 20.0, "foo"),
        ),
        (
            "shutdown=true shutdown-delay-duration=0s elapsed=20s host=foo",
            ShutdownHeader(True, 0.0, 20.0, "foo"),
        ),
        # What OpenShift's platform defaults produce.
        (
            f"shutdown=true shutdown-delay-duration=2m9s elapsed=1m10s host={HOST_ID}",
            ShutdownHeader(True, 129.0, 70.0, HOST_ID),
        ),
        # Any Go duration is accepted, even if the server rounds today.
        (
            "shutdown=true shutdown-delay-duration=1h2m3.5s elapsed=300ms host=h",
            ShutdownHeader(True, 3723.5, 0.3, "h"),
        ),
    ],
)
def test_parses_upstream_vectors(value: str, expected: ShutdownHeader) -> None:
    assert parse_shutdown_header(value) == expected
    assert parse_shutdown_header(value.encode()) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "header value '' does not have the expected fields"),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20s",
            "header value 'shutdown=true shutdown-delay-duration=10s elapsed=20s' does not have "
            "the expected fields",
        ),
        (
            "shutdown-delay-duration=10s shutdown=true elapsed=20s host=foo",
            "header value 'shutdown-delay-duration=10s shutdown=true elapsed=20s host=foo' does "
            "not have the expected fields",
        ),
        (
            "shutdown=true  shutdown-delay-duration=10s elapsed=20s host=foo",
            "header value 'shutdown=true  shutdown-delay-duration=10s elapsed=20s host=foo' does "
            "not have the expected fields",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20s host=foo ",
            "header value 'shutdown=true shutdown-delay-duration=10s elapsed=20s host=foo ' does "
            "not have the expected fields",
        ),
        (
            "shutdown=True shutdown-delay-duration=10s elapsed=20s host=foo",
            "shutdown='True' is not true or false",
        ),
        (
            "shutdown=1 shutdown-delay-duration=10s elapsed=20s host=foo",
            "shutdown='1' is not true or false",
        ),
        (
            "shutdown= shutdown-delay-duration=10s elapsed=20s host=foo",
            "shutdown='' is not true or false",
        ),
        (
            "shutdown=true shutdown-delay-duration=10 elapsed=20s host=foo",
            "shutdown-delay-duration='10' is not a Go duration",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20x host=foo",
            "elapsed='20x' is not a Go duration",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=-1s host=foo",
            "elapsed='-1s' is negative",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20s host=",
            "host='' is not a host identifier",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=99999999999999999999h host=foo",
            "elapsed='99999999999999999999h' is not a Go duration",
        ),
        (
            "shutdown=true shutdown-delay-duration=10s elapsed=20s host=f\x00o",
            "host='f\\x00o' is not a host identifier",
        ),
    ],
)
def test_rejects_malformed_values(value: str, message: str) -> None:
    with pytest.raises(HeaderInvalid) as info:
        parse_shutdown_header(value)
    assert str(info.value) == message


def test_rejects_very_long_values_without_scanning_them() -> None:
    value = "shutdown=true shutdown-delay-duration=10s elapsed=20s host=" + "a" * 100_000
    with pytest.raises(HeaderInvalid) as info:
        parse_shutdown_header(value)
    assert str(info.value) == f"header value is {len(value)} bytes, longer than {MAX_VALUE_LENGTH}"


def test_rejects_non_ascii_bytes() -> None:
    with pytest.raises(HeaderInvalid, match="not ASCII"):
        parse_shutdown_header(b"shutdown=true shutdown-delay-duration=10s elapsed=2\xffs host=a")


def test_error_messages_clip_long_fields() -> None:
    with pytest.raises(HeaderInvalid) as info:
        parse_shutdown_header(f"shutdown={'x' * 300} shutdown-delay-duration=1s elapsed=1s host=a")
    assert str(info.value) == f"shutdown={'x' * 100 + '...'!r} is not true or false"


@pytest.mark.parametrize(
    ("shutdown", "delay", "elapsed", "expected"),
    [
        (False, 70, 0, "shutdown=false shutdown-delay-duration=1m10s elapsed=0s host=h"),
        (True, 129, 0.49, "shutdown=true shutdown-delay-duration=2m9s elapsed=0s host=h"),
        (True, 129, 0.5, "shutdown=true shutdown-delay-duration=2m9s elapsed=1s host=h"),
        (True, 95, 67.2, "shutdown=true shutdown-delay-duration=1m35s elapsed=1m7s host=h"),
    ],
)
def test_formats_as_the_apiserver(
    shutdown: bool, delay: float, elapsed: float, expected: str
) -> None:
    assert format_shutdown_header(shutdown, delay, elapsed, "h") == expected


@given(
    shutdown=st.booleans(),
    delay=st.integers(min_value=0, max_value=10_000),
    elapsed=st.floats(min_value=0, max_value=10_000, allow_nan=False),
    host=st.from_regex(r"apiserver-[a-z2-7]{26}", fullmatch=True),
)
def test_format_then_parse_gives_rounded_values(
    shutdown: bool, delay: int, elapsed: float, host: str
) -> None:
    parsed = parse_shutdown_header(format_shutdown_header(shutdown, delay, elapsed, host))
    assert parsed.shutdown is shutdown
    assert parsed.delay == delay
    assert abs(parsed.elapsed - elapsed) <= 0.5
    assert parsed.elapsed == int(parsed.elapsed)
    assert parsed.host == host


@given(st.text(max_size=200) | st.binary(max_size=200))
def test_arbitrary_input_parses_or_raises_header_invalid(value: str | bytes) -> None:
    with contextlib.suppress(HeaderInvalid):
        parse_shutdown_header(value)


@pytest.mark.parametrize(
    "name", ["X-Openshift-Disruption", "x-openshift-disruption", "X-OPENSHIFT-DISRUPTION"]
)
def test_finds_header_case_insensitively(name: str) -> None:
    headers = [("content-type", "application/json"), (name, "v1"), (name, "v2")]
    assert find_header(headers, RESPONSE_HEADER) == "v1"
    raw = [(k.encode(), v.encode()) for k, v in headers]
    assert find_header(raw, RESPONSE_HEADER) == "v1"


def test_find_header_absent() -> None:
    assert find_header([("content-type", "text/plain")], RESPONSE_HEADER) is None
    assert find_header([], RESPONSE_HEADER) is None


def test_apiserver_id_shape_and_stability() -> None:
    ident = apiserver_id("master-0.example.com")
    assert ident.startswith("apiserver-")
    assert len(ident) == len("apiserver-") + 26
    assert ident[len("apiserver-") :].isalnum()
    assert ident == apiserver_id("master-0.example.com")
    assert ident != apiserver_id("master-1.example.com")


def test_apiserver_id_matches_an_independent_computation() -> None:
    # sha256 over b"\x00\x08master-0" b"\x00\x0ekube-apiserver", computed with hashlib's
    # hexdigest and a hand-rolled base32 of the first 16 bytes.
    import hashlib

    digest = hashlib.sha256(b"\x00\x08master-0\x00\x0ekube-apiserver").digest()[:16]
    bits = "".join(f"{b:08b}" for b in digest) + "00"  # 128 bits padded to 26 x 5
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    expected = "".join(alphabet[int(bits[i : i + 5], 2)] for i in range(0, 130, 5))
    assert apiserver_id("master-0") == "apiserver-" + expected
