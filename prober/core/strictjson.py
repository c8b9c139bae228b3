"""JSON as the prober reads what others wrote: what `json.loads` takes but no writer of ours
writes, and what it cannot take without raising something other than ValueError, is refused
with one `JSONInputError` (a ValueError, so every reader's `except ValueError` holds it).

- NaN, Infinity, -Infinity and numbers too large for a float (`1e400`): Python's JSON
  extensions; a summary or event log holding one made `recommend` crash and an analysis
  print nan. The error names the line and the field (`windows[0].t0`), as every other fault
  of a file the prober reads back does (docs/ARCHITECTURE.md section 4).
- integers of more than MAX_DIGITS digits: `int()` of 4,301 digits raises ValueError from
  inside the parser, and a 400-digit one overflowed `float()` later (OverflowError).
- nesting deeper than the interpreter's recursion allows: RecursionError.

`loads_marked` keeps a non-finite number as a `NonFinite` in its place instead, for a reader
that checks every field's type itself (the event-log codec) and so names the field alike.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_DIGITS = 30  # no count or timestamp of ours comes near
# A string (skipped whole, escapes and all) or a bare token that may be a non-finite number.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?[0-9][0-9.]*[eE][-+]?[0-9]+)')


class JSONInputError(ValueError):
    """Text that is not JSON as the prober reads it. `line` and `field` say where, when the
    text parsed but held a number JSON has not (`field` "" is the document itself)."""

    def __init__(self, problem: str, *, line: int | None = None, field: str | None = None):
        super().__init__(problem if field is None else f"{field or 'value'}: {problem}")
        self.problem = problem
        self.line = line
        self.field = field


@dataclass(frozen=True, slots=True)
class NonFinite:
    """A number JSON has not, where the text had it; shown as the text had it."""

    token: str

    def __repr__(self) -> str:
        return self.token


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise JSONInputError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _finite_float(text: str) -> float | NonFinite:
    value = float(text)
    return value if math.isfinite(value) else NonFinite(text)


def loads_marked(text: str | bytes) -> Any:
    """The document, a non-finite number kept as a `NonFinite` where it stood."""
    try:
        return json.loads(
            text, parse_constant=NonFinite, parse_int=_bounded_int, parse_float=_finite_float
        )
    except RecursionError:
        raise JSONInputError("nested too deep") from None


def loads(text: str | bytes) -> Any:
    """The document, or `JSONInputError`; a non-finite number is refused naming its line and
    field: `expected a finite number, got NaN`."""
    document = loads_marked(text)
    found = first_non_finite(document)
    if found is not None:
        field, value = found
        raise JSONInputError(
            f"expected a finite number, got {value!r}", line=_line_of(text), field=field
        )
    return document


def first_non_finite(value: Any, where: str = "") -> tuple[str, NonFinite] | None:
    """The path (`a.b[2]`) and marker of the first non-finite number, in document order."""
    if isinstance(value, NonFinite):
        return where, value
    if isinstance(value, dict):
        items = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for path, item in items:
        found = first_non_finite(item, path)
        if found is not None:
            return found
    return None


def _line_of(text: str | bytes) -> int | None:
    """The line of the first non-finite number's token, strings skipped."""
    source = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    for match in _TOKENS.finditer(source):
        token = match.group(1)
        if token is not None and not math.isfinite(float(token.replace("Infinity", "inf"))):
            return source.count("\n", 0, match.start()) + 1
    return None


def located(source: str, exc: ValueError, what: str = "not JSON") -> str:
    """The one line a reader reports `exc` of `source` with: `FILE:LINE: field: problem` for a
    number JSON has not, `FILE: not JSON: ...` for text that does not parse."""
    if isinstance(exc, JSONInputError) and exc.field is not None:
        return f"{source}:{exc.line}: {exc}" if exc.line is not None else f"{source}: {exc}"
    return f"{source}: {what}: {exc}"
