"""Go duration parsing and printing, against the vectors of Go's own `time` tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prober.core.durations import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    NANOSECOND,
    SECOND,
    DurationError,
    format_go_duration_ns,
    format_go_seconds,
    parse_go_duration,
    parse_go_duration_ns,
    round_ns,
)

PARSE = [
    ("0", 0),
    ("5s", 5 * SECOND),
    ("30s", 30 * SECOND),
    ("1478s", 1478 * SECOND),
    ("-5s", -5 * SECOND),
    ("+5s", 5 * SECOND),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * SECOND),
    ("5.6s", 5 * SECOND + 600 * MILLISECOND),
    ("5.s", 5 * SECOND),
    (".5s", 500 * MILLISECOND),
    ("1.0s", SECOND),
    ("1.00s", SECOND),
    ("1.004s", SECOND + 4 * MILLISECOND),
    ("1.0040s", SECOND + 4 * MILLISECOND),
    ("100.00100s", 100 * SECOND + MILLISECOND),
    ("10ns", 10 * NANOSECOND),
    ("11us", 11 * MICROSECOND),
    ("12µs", 12 * MICROSECOND),
    ("12μs", 12 * MICROSECOND),
    ("13ms", 13 * MILLISECOND),
    ("14s", 14 * SECOND),
    ("15m", 15 * MINUTE),
    ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MINUTE),
    ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
    ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * MINUTE),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * MINUTE),
    ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827),
    # What the apiserver prints, and what the reference lists.
    ("2m9s", 129 * SECOND),
    ("1m10s", 70 * SECOND),
    ("300ms", 300 * MILLISECOND),
    ("1.5s", 1500 * MILLISECOND),
    ("1h2m3.5s", HOUR + 2 * MINUTE + 3500 * MILLISECOND),
]

INVALID = [
    ("", "invalid duration ''"),
    ("3", "invalid duration '3': missing unit"),
    ("-", "invalid duration '-'"),
    ("s", "invalid duration 's'"),
    (".", "invalid duration '.'"),
    ("-.", "invalid duration '-.'"),
    (".s", "invalid duration '.s'"),
    ("+.s", "invalid duration '+.s'"),
    ("1d", "invalid duration '1d': unknown unit 'd'"),
    ("\x85\x85", "invalid duration '\\x85\\x85'"),
    ("1s ", "invalid duration '1s ': unknown unit 's '"),
    ("9223372036854775808ns", "invalid duration '9223372036854775808ns': overflow"),
    ("9223372036854775.808us", "invalid duration '9223372036854775.808us': overflow"),
    ("9223372036854ms775us808ns", "invalid duration '9223372036854ms775us808ns': overflow"),
    ("-9223372036854775809ns", "invalid duration '-9223372036854775809ns': overflow"),
    ("99999999999999999999h", "invalid duration '99999999999999999999h': overflow"),
]


@pytest.mark.parametrize(("text", "ns"), PARSE)
def test_parse_matches_go(text: str, ns: int) -> None:
    assert parse_go_duration_ns(text) == ns


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_parse_rejects_what_go_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_go_duration_ns(text)
    assert str(info.value) == message


FORMAT = [
    (0, "0s"),
    (1, "1ns"),
    (1100, "1.1µs"),
    (2200 * MICROSECOND, "2.2ms"),
    (3300 * MILLISECOND, "3.3s"),
    (4 * MINUTE + 5 * SECOND, "4m5s"),
    (4 * MINUTE + 5001 * MILLISECOND, "4m5.001s"),
    (5 * HOUR + 6 * MINUTE + 7001 * MILLISECOND, "5h6m7.001s"),
    (8 * MINUTE + 1, "8m0.000000001s"),
    ((1 << 63) - 1, "2562047h47m16.854775807s"),
    (-(1 << 63), "-2562047h47m16.854775808s"),
    (-3 * SECOND, "-3s"),
    (129 * SECOND, "2m9s"),
    (HOUR, "1h0m0s"),
]


@pytest.mark.parametrize(("ns", "text"), FORMAT)
def test_format_matches_go(ns: int, text: str) -> None:
    assert format_go_duration_ns(ns) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.4999, "0s"),
        (0.5, "1s"),  # Go rounds halfway values away from zero
        (1.5, "2s"),
        (2.5, "3s"),
        (20.2, "20s"),
        (70, "1m10s"),
        (129.4, "2m9s"),
        (-0.5, "-1s"),
    ],
)
def test_format_rounded_to_seconds(seconds: float, text: str) -> None:
    assert format_go_seconds(seconds) == text


def test_round_ns_halves_away_from_zero() -> None:
    assert round_ns(1500 * MILLISECOND, SECOND) == 2 * SECOND
    assert round_ns(-1500 * MILLISECOND, SECOND) == -2 * SECOND
    assert round_ns(1499 * MILLISECOND, SECOND) == SECOND
    assert round_ns(7, 0) == 7


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_format_then_parse_round_trips(ns: int) -> None:
    assert parse_go_duration_ns(format_go_duration_ns(ns)) == ns


def test_parse_in_seconds() -> None:
    assert parse_go_duration("100ms") == pytest.approx(0.1)
