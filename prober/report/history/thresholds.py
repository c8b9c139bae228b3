"""Per-platform history: percentiles of many runs, and the allowed values verdicts use.

    {"v": 1, "entries": [{"platform", "lb", "protocol", "connection",
                          "metric": "reaction|disruption", "p50", "p75", "p95", "p99",
                          "runs", "usable"}]}

One value per run and key: a run's `worst` reaction (only runs that saw a shutdown window
count; a window without late requests counts as 0 s, and a small negative reaction, a request
sent just before T0 and answered after it, as 0 s too) and its worst disruption seconds.
Percentiles follow `core.stats` (BigQuery's PERCENTILE_CONT, as origin's allowed values do).
Keys with fewer runs than `min_runs` are kept but marked unusable. Entries under the platform
`all` pool every platform's runs; they are written only when the history covers at least two
platforms, because pooled from one platform they would pass its numbers off as everyone's.
Platform names are compared in lower case (`AWS` from an Infrastructure object is `aws`).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final, TextIO, cast

from prober.common import filekinds
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.models import parse_rfc3339
from prober.core.stats import percentiles
from prober.report.format.tables import seconds, table
from prober.report.history.export import load_facts
from prober.report.history.history import RunFacts
from prober.report.history.html_thresholds import render_dashboard
from prober.report.history.queryresult import load_query_result, runs_in
from prober.report.history.threshold_rows import (
    ALL_PLATFORMS,
    Entry,
    from_row,
    sort_entries,
    to_row,
)
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import read_json, write_json
from prober.report.schema.keys import Key, key_name
from prober.report.schema.types import Metric, Period, ThresholdsDocument

THRESHOLDS_VERSION: Final = 1
DEFAULT_MIN_RUNS = 100


def run_values(facts: RunFacts) -> list[tuple[Key, Metric, float]]:
    """The (key, metric, value) points one run adds to the history."""
    points: list[tuple[Key, Metric, float]] = []
    for worst in facts.worst:
        if facts.windows:
            points.append((worst.key, "reaction", max(0.0, worst.reaction or 0.0)))
        points.append((worst.key, "disruption", worst.disruption_seconds))
    return points


def aggregate(runs: Iterable[RunFacts], min_runs: int = DEFAULT_MIN_RUNS) -> list[Entry]:
    values: dict[tuple[str, Key, Metric], list[float]] = defaultdict(list)
    platforms: set[str] = set()
    for facts in runs:
        platform = facts.platform.lower()
        platforms.add(platform)
        for key, metric, value in run_values(facts):
            values[(platform, key, metric)].append(value)
            values[(ALL_PLATFORMS, key, metric)].append(value)
    entries = []
    for (platform, key, metric), points in values.items():
        if platform == ALL_PLATFORMS and len(platforms) < 2:
            continue
        p = percentiles(points)
        entries.append(
            Entry(platform, *key, metric, p.p50, p.p75, p.p95, p.p99, p.count, p.count >= min_runs)
        )
    return sort_entries(entries)


def to_document(entries: Iterable[Entry], period: Period | None = None) -> ThresholdsDocument:
    rows = [to_row(e) for e in entries]
    if period is None:
        return {"v": THRESHOLDS_VERSION, "entries": rows}
    return {"v": THRESHOLDS_VERSION, "period": period, "entries": rows}


def period_of(runs: Iterable[RunFacts]) -> Period | None:
    """The first and the last start time of the runs, when every summary says it."""
    started = [facts.started for facts in runs]
    if not started or None in started:
        return None
    known = sorted((s for s in started if s is not None), key=parse_rfc3339)
    return {"start": known[0], "end": known[-1]}


@dataclass(frozen=True, slots=True)
class Lookup:
    """The history a verdict uses, or why there is none; `source` says which it used."""

    entry: Entry | None
    source: str

    @property
    def allowed(self) -> float | None:
        return None if self.entry is None else self.entry.allowed


class Thresholds:
    def __init__(self, entries: Iterable[Entry], source: str = "<thresholds>") -> None:
        self.source = source
        self.entries = list(entries)
        self._by_key = {(e.platform, e.key, e.metric): e for e in self.entries}
        self.platforms = sorted({e.platform for e in self.entries} - {ALL_PLATFORMS})

    def covers(self, platform: str) -> bool:
        """Whether any entry could serve this platform: its own, or pooled ones."""
        return platform.lower() in self.platforms or any(
            e.platform == ALL_PLATFORMS for e in self.entries
        )

    def lookup(self, platform: str, key: Key, metric: Metric) -> Lookup:
        """The exact platform's usable entry, else all platforms', else why neither."""
        name = platform.lower() or "(unknown)"
        exact = self._by_key.get((name, key, metric))
        if exact is not None and exact.usable:
            return Lookup(exact, f"P99 of {exact.runs} {name} runs")
        pooled = self._by_key.get((ALL_PLATFORMS, key, metric))
        own = f"{exact.runs} {name} runs, too few" if exact else f"no {name} history"
        if pooled is not None and pooled.usable:
            return Lookup(pooled, f"P99 of {pooled.runs} runs on all platforms ({own})")
        others = f"{pooled.runs} runs on all platforms, too few" if pooled else "no pooled history"
        return Lookup(
            None, f"no usable history for {name} {key_name(key)} {metric}: {own}; {others}"
        )


def load_thresholds(path: Path) -> Thresholds:
    doc = read_json(path, filekinds.THRESHOLDS)
    if type(doc.get("v")) is not int or doc.get("v") != THRESHOLDS_VERSION:  # not True, not 1.0
        raise BadInput(f"{path}: thresholds version {doc.get('v')!r}, this reader knows 1")
    rows = doc.get("entries")
    if not isinstance(rows, list):
        raise BadInput(f"{path}: field 'entries': expected a list")
    entries = (from_row(row, f"{path}: entries[{i}]") for i, row in enumerate(rows))
    return Thresholds(entries, str(path))


def load_period(path: Path) -> Period | None:
    """The `period` of a thresholds.json, None if it has none (files written before it was
    recorded); checked, as `load_thresholds` checks the entries, so that a trend over many
    files orders them by real instants, not by however each file spells its dates."""
    raw = read_json(path, filekinds.THRESHOLDS).get("period")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: field 'period': expected an object, got {raw!r:.40}")
    for name in ("start", "end"):
        value = raw.get(name)
        if not isinstance(value, str) or not _is_rfc3339(value):
            raise BadInput(f"{path}: period.{name}: expected an RFC 3339 time, got {value!r:.40}")
    period = cast(Period, raw)
    if parse_rfc3339(period["start"]) > parse_rfc3339(period["end"]):
        raise BadInput(f"{path}: period: start {period['start']} is after end {period['end']}")
    return {"start": period["start"], "end": period["end"]}


def _is_rfc3339(text: str) -> bool:
    """A date, a time and an offset: without the offset the instant depends on the reader."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return moment.tzinfo is not None


def thresholds_command(
    summaries: Sequence[Path],
    *,
    output: Path | None,
    out: Path,
    min_runs: int,
    query_result: Path | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """From summaries, or from the warehouse query's result (`query_result`): the same
    thresholds.json either way."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if query_result is not None:
        entries, period = load_query_result(query_result, min_runs)
        runs = sources = runs_in(entries)
    else:
        facts = load_facts(summaries, stderr)
        entries, period = aggregate(facts, min_runs), period_of(facts)
        runs = sources = len(facts)
    json_path = output or out / "thresholds.json"
    html_path = out / "thresholds.html"
    with writing(json_path):
        out.mkdir(parents=True, exist_ok=True)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(json_path, to_document(entries, period))
    with writing(html_path):
        html_path.write_text(render_dashboard(entries, runs, sources), encoding="utf-8")
    rows = [
        [
            e.platform,
            e.lb.value,
            e.protocol.value,
            e.connection.value,
            e.metric,
            seconds(e.p50),
            seconds(e.p95),
            seconds(e.p99),
            f"{e.allowed:.0f} s",
            str(e.runs),
            "yes" if e.usable else f"no (< {min_runs})",
        ]
        for e in entries
    ]
    headers = [
        "platform",
        "lb",
        "protocol",
        "connection",
        "metric",
        "P50",
        "P95",
        "P99",
        "allowed",
        "runs",
        "usable",
    ]
    print("\n".join(table(headers, rows)), file=stdout)
    print(f"\nwrote {json_path}\nwrote {html_path}", file=stdout)
    return ExitCode.OK
