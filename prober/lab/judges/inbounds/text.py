"""Every estimate an output shows, held within the bound it shows with it: the findings, and
the reader of text.

A run's outputs show each measured value beside where the sampling puts the truth
(docs/ARCHITECTURE.md section 7). An estimate outside its own bound says the measurement
contradicts itself, whether a tracker, a writer or the rounding for display made it so.
`inbounds_outputs.check_outputs` reads every output of a run; this module holds what it
finds (`Checked`) and how it reads text as shown (`read_text`): each value "V s" paired with
the bound that follows it in the same clause, `tables.bound`'s "[lo, hi]", `verdicts.within`'s
"at least lo s" or "at most hi s", `timeline.window_title`'s "between lo and hi s". So "6.14 s
[6.15, 6.16]" is found whatever rounded it, in a table cell, a verdict's message or a title.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Outside:
    """One estimate outside its bound: where it is shown, and the numbers as shown."""

    file: str
    record: str
    estimate: float
    lo: float | None
    hi: float | None

    def __str__(self) -> str:
        shown = ", ".join("?" if v is None else _number(v) for v in (self.lo, self.hi))
        return f"{self.file}: {self.record}: {_number(self.estimate)} outside its bound [{shown}]"


def _number(value: float) -> str:
    # To the microsecond, as the outputs keep times: no float noise, no digit lost.
    return f"{value:.6f}".rstrip("0").rstrip(".")


@dataclass(slots=True)
class Checked:
    """What a check found: the estimates outside their bounds, how many it held per file
    (a reader that finds nothing is told from an output with nothing in it), and the files
    it could not read."""

    outside: list[Outside] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)

    def hold(
        self, file: str, record: str, estimate: float | None, lo: float | None, hi: float | None
    ) -> None:
        """Count one estimate, and keep it if it lies outside [lo, hi] (None: unbounded)."""
        if estimate is None:
            return
        self.counts[file] += 1
        if (lo is not None and estimate < lo) or (hi is not None and estimate > hi):
            self.outside.append(Outside(file, record, estimate, lo, hi))

    def add(self, other: Checked) -> None:
        self.outside += other.outside
        self.counts.update(other.counts)
        self.unreadable += other.unreadable

    def problems(self) -> list[str]:
        """One line per estimate outside its bound and per file that could not be read."""
        return [*map(str, self.outside), *self.unreadable]


# -- text, as shown --------------------------------------------------------------------------

_NUM = r"-?\d+(?:\.\d+)?"
_SIDE = rf"{_NUM}|\?"
_TOKEN = re.compile(
    rf"\[(?P<lo>{_SIDE}), (?P<hi>{_SIDE})\]"  # tables.bound
    rf"|between (?P<from>{_NUM}) and (?P<to>{_NUM}) s\b"  # timeline.window_title
    rf"|at least (?P<least>{_NUM}) s\b"  # verdicts.within
    rf"|at most (?P<most>{_NUM}) s\b"
    rf"|(?P<spread>[+±] ?{_NUM} s\b)"  # a difference or a spread: ends the value before it
    rf"|(?<![\w.+-])(?P<value>{_NUM}) s\b"
    r"|(?P<stop>[;\n])"
)


def _side(text: str | None) -> float | None:
    return None if text is None or text == "?" else float(text)


def read_text(text: str) -> Iterator[tuple[str, float, float | None, float | None]]:
    """Each value shown with a bound in `text`: the clause it is in, the value, lo, hi.

    A bound belongs to the nearest value "V s" before it in the same clause (a line, or up
    to a ";"), once."""
    value: tuple[int, float] | None = None
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "value":
            value = (match.start(), float(match["value"]))
            continue
        if kind in ("stop", "spread") or value is None:
            value = None
            continue
        if match["least"] is not None:
            lo, hi = float(match["least"]), None
        elif match["most"] is not None:
            lo, hi = None, float(match["most"])
        elif match["from"] is not None:
            lo, hi = float(match["from"]), float(match["to"])
        else:
            lo, hi = _side(match["lo"]), _side(match["hi"])
        yield text[value[0] : match.end()], value[1], lo, hi
        value = None


def check_text(file: str, text: str, where: str = "") -> Checked:
    """Every value shown with its bound in printed text (a line at a time)."""
    checked = Checked()
    for number, line in enumerate(text.splitlines(), 1):
        for shown, value, lo, hi in read_text(line):
            place = f"{where} " if where else ""
            checked.hold(file, f'{place}line {number}: "{shown}"', value, lo, hi)
    return checked
