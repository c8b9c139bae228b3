"""One parser per kind of value a user types, for config files, environment variables and
flags alike, so a value means the same everywhere and is refused with the same words.

A parser takes what YAML gave (a typed value) or what a variable or flag gave (a string) and
returns the typed value, or raises `Invalid` with the problem; the caller says where the value
came from. `flag(parser)` makes one an argparse type: argparse then names the option, prints
one line and exits 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from prober.core.durations import DurationError, format_go_duration, parse_go_duration
from prober.core.numbers import is_decimal

T = TypeVar("T")
ANY_ADDRESS = "0.0.0.0"


class Invalid(ValueError):
    """A value that cannot be used; `sub` locates the fault inside a nested value."""

    def __init__(self, problem: str, sub: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.sub = sub


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def flag(parse: Callable[[object], T]) -> Callable[[str], T]:
    """`parse` as an argparse `type=`."""

    def parse_flag(text: str) -> T:
        try:
            return parse(text)
        except Invalid as exc:
            raise argparse.ArgumentTypeError(exc.problem) from None

    return parse_flag


def duration(*, minimum: float = 0.0, allow_zero: bool = False) -> Callable[[object], float]:
    """A Go duration (`100ms`, `1m30s`) longer than `minimum`, or 0 where `allow_zero`."""

    def parse(value: object) -> float:
        if not isinstance(value, str):
            raise Invalid(f"expected a Go duration such as 100ms or 5s, got {shown(value)}")
        try:
            seconds = parse_go_duration(value)
        except DurationError:
            raise Invalid(f"{value!r} is not a Go duration such as 100ms or 5s") from None
        if seconds == 0 and allow_zero:
            return seconds
        if seconds <= 0 or seconds < minimum:
            least = format_go_duration(minimum) if minimum else "0s"
            raise Invalid(f"{value!r} must be longer than {least}")
        return seconds

    return parse


def whole(minimum: int) -> Callable[[object], int]:
    """A whole number of at least `minimum`."""

    def parse(value: object) -> int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and is_decimal(value.strip()):
            number = int(value)
        if number is None or number < minimum:
            raise Invalid(f"expected a whole number of at least {minimum}, got {shown(value)}")
        return number

    return parse


positive_int = whole(1)


def at_least(minimum: float) -> Callable[[object], float]:
    """A number of at least `minimum`."""

    def parse(value: object) -> float:
        number = _number(value)
        if number is None or not number >= minimum:
            raise Invalid(f"expected a number of at least {minimum:g}, got {shown(value)}")
        return number

    return parse


def positive_float(value: object) -> float:
    number = _number(value)
    if number is None or not number > 0:
        raise Invalid(f"expected a number above 0, got {shown(value)}")
    return number


def non_negative_float(value: object) -> float:
    number = _number(value)
    if number is None or not number >= 0:
        raise Invalid(f"expected 0 or a number above it, got {shown(value)}")
    return number


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def host_port(value: object) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `:PORT` (every interface): what to listen on."""
    if not isinstance(value, str) or ":" not in value:
        raise Invalid(f"expected HOST:PORT such as 0.0.0.0:9090, got {shown(value)}")
    host, _, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or ANY_ADDRESS
    if not is_decimal(port) or int(port) > 65535:
        raise Invalid(f"{value!r}: port {port!r} is not a number from 0 to 65535")
    return host, int(port)
