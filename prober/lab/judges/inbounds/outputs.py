"""Every output of a run read for its estimates and their bounds (`inbounds`): `check_outputs`
reads each one it finds under a directory and names each estimate outside its bound, with the
file, the record and the numbers. `prober lab --check` and the tests run it.

What is read, and how:

- `summary.json` as data: T0, every reaction (per window and the worst), every interval's
  edges; and its verdicts' messages and `explained` lines as worded (`inbounds.read_text`);
- `junit.xml`: every test's messages, as worded;
- OpenShift CI's files (`origin`): the timeline's annotations as data, its shutdown message
  in origin's words (whole-second Go durations), the backend disruption lines' edges, the
  autodl rows as the loader reads them;
- `report.html` as shown and drawn (`inbounds_html`).

What a command prints is checked where it is printed (`inbounds.check_text`): `prober lab`
its run's report, a test what `prober analyze` printed. A saved report.txt is not read: the
lab's CHECK lines in it put the truth, not an estimate, beside a bound.

The watch sections and `retry_after` carry no estimate with a bound (counts, quantiles and
measured spans): nothing is read of them. `lab-result.json` is the lab's, read there
(`prober.lab.judges.inbounds`).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase as fnmatch
from pathlib import Path
from typing import Any

from prober.core.durations import DurationError, parse_go_duration
from prober.core.models import parse_rfc3339
from prober.lab.judges.inbounds.page import check_html
from prober.lab.judges.inbounds.text import Checked, check_text

# -- summary.json ----------------------------------------------------------------------------


def check_summary(file: str, doc: Mapping[str, Any]) -> Checked:
    """T0, every reaction (per window and the worst), every interval's edges, and the
    verdicts' messages and explained lines as they are worded."""
    checked = Checked()
    for w, window in enumerate(doc["windows"]):
        here = f"windows[{w}] ({window['host']})"
        checked.hold(file, f"{here} t0", window["t0"], window["t0_lo"], window["t0_hi"])
        for s, ws in enumerate(window["streams"]):
            checked.hold(file, f"{here}.streams[{s}] ({ws['stream']}) reaction", *_reaction(ws))
    for s, stream in enumerate(doc["streams"]):
        for i, interval in enumerate(stream["intervals"]):
            here = f"streams[{s}] ({stream['stream']}).intervals[{i}]"
            for edge in ("start", "end"):
                bound = (interval.get(f"{edge}_{side}") for side in ("lo", "hi"))
                checked.hold(file, f"{here} {edge}_t", interval[f"{edge}_t"], *bound)
    for k, worst in enumerate(doc["worst"]):
        key = f"{worst['lb']}/{worst['protocol']}/{worst['connection']}"
        checked.hold(file, f"worst[{k}] ({key}) reaction", *_reaction(worst))
    for n, line in enumerate(doc.get("explained", [])):
        checked.add(check_text(file, line, f"explained[{n}]"))
    for n, verdict in enumerate(doc.get("verdicts", [])):
        checked.add(check_text(file, verdict["message"], f"verdicts[{n}] message"))
    return checked


def _reaction(entry: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
    return entry["reaction"], entry.get("reaction_lo"), entry.get("reaction_hi")


# -- junit.xml -------------------------------------------------------------------------------


def check_junit(file: str, text: str) -> Checked:
    """Every test's messages: a failure's (and its details), a skip's reason, a pass's."""
    checked = Checked()
    for case in ET.fromstring(text).iter("testcase"):
        name = case.get("name", "?")
        for child in case:
            shown = [(child.tag, child.text or "")]
            if child.get("message") is not None:
                shown.insert(0, (f"{child.tag} message", child.get("message", "")))
            for what, words in shown:
                checked.add(check_text(file, words, f"testcase {name!r} {what}"))
    return checked


# -- OpenShift CI's files (`origin`) ---------------------------------------------------------

_SHUTDOWN_WORDS = re.compile(
    r"took new\((?P<new>[^)]*)\) reused\((?P<reused>[^)]*)\).* new-bound=\[(?P<new_lo>[^,]*), "
    r"(?P<new_hi>[^\]]*)\] reused-bound=\[(?P<reused_lo>[^,]*), (?P<reused_hi>[^\]]*)\]"
)
_EDGE_NOTE = re.compile(r"(?<!\S)(?P<key>start|end)(?P<side>-lo|-hi)?/(?P<value>\S+)")


def _moment(notes: Mapping[str, str], key: str) -> float | None:
    return parse_rfc3339(notes[key]) if key in notes else None


def check_timeline(file: str, doc: Mapping[str, Any]) -> Checked:
    """origin's monitor intervals: each disruption's edges and each shutdown's T0 and
    reactions in the annotations, and the shutdown message's reactions in its words."""
    checked = Checked()
    for n, item in enumerate(doc["items"]):
        notes = item["message"]["annotations"]
        here = f"items[{n}] ({item['source']})"
        if item["source"] == "Disruption" and "start" in notes:
            for edge in ("start", "end"):
                moments = (_moment(notes, edge + side) for side in ("", "-lo", "-hi"))
                checked.hold(file, f"{here} {edge}", *moments)
        elif item["source"] == "APIServerShutdown":
            here += f" {notes.get('host')} {item['locator']['keys'].get('load-balancer')}"
            t0 = (_moment(notes, k) for k in ("t0", "t0-lo", "t0-hi"))
            checked.hold(file, f"{here} t0", *t0)
            for key in sorted(k for k in notes if k.endswith("-reaction")):
                values = (notes.get(key + side) for side in ("", "-lo", "-hi"))
                estimate, lo, hi = (None if v is None else float(v) for v in values)
                checked.hold(file, f"{here} {key}", estimate, lo, hi)
            checked.add(_shutdown_words(file, here, item["message"]["humanMessage"]))
    return checked


def _shutdown_words(file: str, here: str, human: str) -> Checked:
    checked = Checked()
    words = _SHUTDOWN_WORDS.search(human)
    if words is None:
        checked.unreadable.append(f"{file}: {here}: a shutdown message not in origin's words")
        return checked
    try:
        for mode in ("new", "reused"):
            lo, hi = (_duration(words[f"{mode}_{side}"]) for side in ("lo", "hi"))
            sides = ", ".join(words[f"{mode}_{side}"] for side in ("lo", "hi"))
            shown = f"{mode}({words[mode]}) ... {mode}-bound=[{sides}]"
            checked.hold(file, f'{here} message "{shown}"', _duration(words[mode]), lo, hi)
    except DurationError as exc:
        checked.unreadable.append(f"{file}: {here}: {exc}")
    return checked


def _duration(text: str) -> float | None:
    return None if text == "?" else parse_go_duration(text)


def check_backend_disruption(file: str, doc: Mapping[str, Any]) -> Checked:
    """Each disruption line (origin's `Interval.String()`): its edges' annotations."""
    checked = Checked()
    for name, entry in doc["BackendDisruptions"].items():
        for n, line in enumerate(entry["DisruptionMessages"]):
            notes = {m["key"] + (m["side"] or ""): m["value"] for m in _EDGE_NOTE.finditer(line)}
            for edge in ("start", "end"):
                moments = (_moment(notes, edge + side) for side in ("", "-lo", "-hi"))
                checked.hold(file, f"{name} DisruptionMessages[{n}] {edge}", *moments)
    return checked


# The estimates of the warehouse rows, each with its bound's columns (`export`).
_ROW_ESTIMATES = (("t0", "t0_lo", "t0_hi"), ("reaction", "reaction_lo", "reaction_hi"),
                  ("start_t", "start_lo", "start_hi"), ("end_t", "end_lo", "end_hi"))  # fmt: skip


def check_autodl(file: str, doc: Mapping[str, Any]) -> Checked:
    """ci-data-loader's rows: strings, a null left out (unbounded)."""
    checked = Checked()
    for n, row in enumerate(doc["rows"]):
        for estimate, lo, hi in _ROW_ESTIMATES:
            if estimate in row:
                values = (row.get(name) for name in (estimate, lo, hi))
                shown = (None if v is None else float(v) for v in values)
                checked.hold(file, f"rows[{n}] ({row.get('stream')}) {estimate}", *shown)
    return checked


# -- a directory of outputs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reader:
    """The outputs named like `pattern` (fnmatch), and how their estimates are read: from
    their text, or from their JSON."""

    pattern: str
    read: Callable[[str, Any], Checked]
    json: bool = True


READERS: tuple[Reader, ...] = (
    Reader("summary.json", check_summary),
    Reader("junit.xml", check_junit, json=False),
    Reader("report.html", check_html, json=False),
    Reader("e2e-timelines_prober_*.json", check_timeline),
    Reader("backend-disruption_prober_*.json", check_backend_disruption),
    Reader("prober-*-autodl.json", check_autodl),
)


def check_file(path: Path, reader: Reader, name: str | None = None) -> Checked:
    """One output; `name`: how it is named in what is found (its path by default). A file
    that cannot be read as its kind is a finding too."""
    shown = name or str(path)
    try:
        text = path.read_text(encoding="utf-8")
        return reader.read(shown, json.loads(text) if reader.json else text)
    except (OSError, ValueError, KeyError, TypeError, ET.ParseError) as exc:
        return Checked(unreadable=[f"{shown}: cannot be read as {reader.pattern}: {exc!r:.200}"])


def reader_of(name: str, readers: Sequence[Reader] = READERS) -> Reader | None:
    """The reader of the output named `name` (a file name), if it is one."""
    return next((r for r in readers if fnmatch(name, r.pattern)), None)


def check_outputs(directory: Path, readers: Sequence[Reader] = READERS) -> Checked:
    """Every output under `directory` (its run directories too) that one of `readers`
    reads, each named by its path inside it."""
    checked = Checked()
    for path in sorted(directory.rglob("*")):
        reader = reader_of(path.name, readers)
        if reader is not None and path.is_file():
            checked.add(check_file(path, reader, str(path.relative_to(directory))))
    return checked
