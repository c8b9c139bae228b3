"""The shared value parsers: one table per kind, the exact words of each refusal."""

from __future__ import annotations

import argparse

import pytest

from prober.common.values import (
    Invalid,
    duration,
    flag,
    host_port,
    non_negative_float,
    positive_float,
    positive_int,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9095", ("127.0.0.1", 9095)),
        ("[::1]:0", ("::1", 0)),
        ("[fd00::1]:9090", ("fd00::1", 9090)),
        (":80", ("0.0.0.0", 80)),
    ],
)
def test_host_port(text: str, expected: tuple[str, int]) -> None:
    assert host_port(text) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9095", "expected HOST:PORT such as 0.0.0.0:9090, got '9095'"),
        (9095, "expected HOST:PORT such as 0.0.0.0:9090, got 9095"),
        ("host:", "'host:': port '' is not a number from 0 to 65535"),
        ("host:http", "'host:http': port 'http' is not a number from 0 to 65535"),
        ("h:70000", "'h:70000': port '70000' is not a number from 0 to 65535"),
    ],
)
def test_host_port_refuses(value: object, message: str) -> None:
    with pytest.raises(Invalid) as caught:
        host_port(value)
    assert caught.value.problem == message


@pytest.mark.parametrize(
    ("parse", "value", "expected"),
    [
        (duration(), "1m30s", 90.0),
        (duration(allow_zero=True), "0s", 0.0),
        (positive_int, "3", 3),
        (positive_int, 3, 3),
        (positive_float, "0.5", 0.5),
        (non_negative_float, "0", 0.0),
        (non_negative_float, 2, 2.0),
    ],
)
def test_values_taken(parse, value: object, expected: object) -> None:
    assert parse(value) == expected


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (duration(), "soon", "'soon' is not a Go duration such as 100ms or 5s"),
        (duration(), 5, "expected a Go duration such as 100ms or 5s, got 5"),
        (duration(), "0s", "'0s' must be longer than 0s"),
        (duration(minimum=1.0), "10ms", "'10ms' must be longer than 1s"),
        (positive_int, "0", "expected a whole number of at least 1, got '0'"),
        (positive_int, True, "expected a whole number of at least 1, got True"),
        (positive_float, "0", "expected a number above 0, got '0'"),
        (positive_float, "nan", "expected a number above 0, got 'nan'"),
        (non_negative_float, "-1", "expected 0 or a number above it, got '-1'"),
        (non_negative_float, "x", "expected 0 or a number above it, got 'x'"),
    ],
)
def test_values_refused(parse, value: object, message: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse(value)
    assert caught.value.problem == message


def test_a_flag_refusal_is_argparse_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="prober x")
    parser.add_argument("--repeat", type=flag(positive_int))
    assert parser.parse_args(["--repeat", "2"]).repeat == 2
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--repeat", "0"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert (
        last == "prober x: error: argument --repeat: expected a whole number of at least 1, got '0'"
    )
