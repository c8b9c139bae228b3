"""JSON as the prober reads what others wrote: what `json.loads` takes but no writer of ours
writes, and what it cannot take without raising something other than ValueError, is refused
with one `JSONInputError` (a ValueError, so every reader's `except ValueError` holds it).

- NaN, Infinity and -Infinity: Python's JSON extensions; a summary or event log holding one
  made `recommend` crash and an analysis print nan.
- integers of more than MAX_DIGITS digits: `int()` of 4,301 digits raises ValueError from
  inside the parser, and a 400-digit one overflowed `float()` later (OverflowError).
- nesting deeper than the interpreter's recursion allows: RecursionError.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DIGITS = 30  # no count or timestamp of ours comes near


class JSONInputError(ValueError):
    """Text that is not JSON as the prober reads it."""


def _no_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise JSONInputError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def loads(text: str | bytes) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int)
    except RecursionError:
        raise JSONInputError("nested too deep") from None
