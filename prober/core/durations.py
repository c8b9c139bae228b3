"""Go durations: parse the whole `time.ParseDuration` grammar, print as `Duration.String()` does.

The apiserver prints `elapsed` and `shutdown-delay-duration` as `d.Round(time.Second).String()`,
and our configuration uses Go-style durations too, so both directions follow Go exactly.
Durations are integer nanoseconds internally, as in Go, so that parsing and printing round-trip.
"""

from __future__ import annotations

NANOSECOND = 1
MICROSECOND = 1000 * NANOSECOND
MILLISECOND = 1000 * MICROSECOND
SECOND = 1000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_LIMIT = 1 << 63  # Go's Duration is an int64: magnitudes up to 2**63 (negative only)

_UNITS = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 micro sign
    "μs": MICROSECOND,  # U+03BC greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}


class DurationError(ValueError):
    """A string that is not a Go duration."""


def parse_go_duration_ns(text: str) -> int:
    """Parse a Go duration string (`1h2m3.5s`, `300ms`, `-1.5h`, `0`) into nanoseconds.

    Follows `time.ParseDuration` step by step, including its float arithmetic for fractions,
    so that every string gives the very nanosecond count Go would.
    """
    orig = text
    negative = text[:1] == "-"
    if text[:1] in ("+", "-"):
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise DurationError(f"invalid duration {orig!r}")
    total = 0
    while text:
        value, text = _parse_component(orig, text)
        total += value
        if total > _LIMIT:
            raise DurationError(f"invalid duration {orig!r}: overflow")
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise DurationError(f"invalid duration {orig!r}: overflow")
    return total


def _parse_component(orig: str, text: str) -> tuple[int, str]:
    """One `<digits>[.<digits>]<unit>` component: its value in ns and the rest of the text."""
    whole, text = _take_digits(text)
    # Past 19 significant digits it overflows int64 anyway, and int() of thousands raises
    # ValueError (Python's digit limit): more than 20 are an overflow without converting.
    significant = whole.lstrip("0")
    value = int(significant) if 0 < len(significant) <= 20 else 0
    if len(significant) > 20:
        value = _LIMIT + 1
    if value > _LIMIT:
        raise DurationError(f"invalid duration {orig!r}: overflow")
    fraction, scale, has_fraction = 0, 1.0, False
    if text[:1] == ".":
        digits, text = _take_digits(text[1:])
        has_fraction = bool(digits)
        fraction, scale = _leading_fraction(digits)
    if not whole and not has_fraction:
        raise DurationError(f"invalid duration {orig!r}")
    unit_end = 0
    while unit_end < len(text) and text[unit_end] != "." and not text[unit_end].isdigit():
        unit_end += 1
    unit = text[:unit_end]
    if not unit:
        raise DurationError(f"invalid duration {orig!r}: missing unit")
    multiple = _UNITS.get(unit)
    if multiple is None:
        raise DurationError(f"invalid duration {orig!r}: unknown unit {unit!r}")
    if value > _LIMIT // multiple:
        raise DurationError(f"invalid duration {orig!r}: overflow")
    value *= multiple
    if fraction:
        # Go uses float64 here, "to be nanosecond accurate for fractions of hours".
        value += int(float(fraction) * (float(multiple) / scale))
        if value > _LIMIT:
            raise DurationError(f"invalid duration {orig!r}: overflow")
    return value, text[unit_end:]


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's leadingFraction: digits beyond int64 precision are consumed but ignored."""
    fraction, scale = 0, 1.0
    for digit in digits:
        if fraction > (_LIMIT - 1) // 10:
            break
        candidate = fraction * 10 + int(digit)
        if candidate > _LIMIT - 1:
            break
        fraction, scale = candidate, scale * 10
    return fraction, scale


def _take_digits(text: str) -> tuple[str, str]:
    end = 0
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return text[:end], text[end:]


def parse_go_duration(text: str) -> float:
    """Parse a Go duration string into seconds."""
    return parse_go_duration_ns(text) / SECOND


def format_go_duration_ns(ns: int) -> str:
    """Print nanoseconds exactly as Go's `time.Duration.String()` does."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        if u < MILLISECOND:
            return f"{sign}{_fixed(u, MICROSECOND)}µs"
        return f"{sign}{_fixed(u, MILLISECOND)}ms"
    hours, rest = divmod(u, HOUR)
    minutes, rest = divmod(rest, MINUTE)
    seconds = _fixed(rest, SECOND)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _fixed(value: int, unit: int) -> str:
    """`value / unit` with the fraction's trailing zeros removed, as Go's fmtFrac does."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(width, '0').rstrip('0')}"


def round_ns(ns: int, multiple: int) -> int:
    """Go's `Duration.Round`: to the nearest multiple, halfway values away from zero."""
    if multiple <= 0:
        return ns
    r = abs(ns) % multiple
    magnitude = abs(ns) - r if r + r < multiple else abs(ns) + multiple - r
    return -magnitude if ns < 0 else magnitude


def seconds_to_ns(seconds: float) -> int:
    return round(seconds * SECOND)


def format_go_seconds(seconds: float) -> str:
    """A duration in seconds, rounded to whole seconds, printed as the apiserver prints it."""
    return format_go_duration_ns(round_ns(seconds_to_ns(seconds), SECOND))


def format_go_duration(seconds: float) -> str:
    """A duration in seconds printed as Go would (no rounding beyond nanoseconds)."""
    return format_go_duration_ns(seconds_to_ns(seconds))
