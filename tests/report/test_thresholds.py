"""`prober thresholds`: percentiles of synthetic histories, the lookup, the command."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection, Protocol
from prober.core.stats import percentile_cont
from prober.report.history.history import RunFacts, WorstOfRun, load_run_facts
from prober.report.history.threshold_rows import Entry, from_row, to_row
from prober.report.history.thresholds import Thresholds, aggregate, load_thresholds
from prober.report.schema.errors import BadInput
from tests.report.history import summary_doc, write_history

KEY = (LB.INTERNAL, Protocol.HTTP2, Connection.NEW)
OTHER = (LB.EXTERNAL, Protocol.HTTP1, Connection.REUSED)


def facts(
    platform: str, run_id: str, reaction: float | None, disruption: float = 0.0, windows: int = 3
) -> RunFacts:
    return RunFacts("mem", run_id, platform, windows, (WorstOfRun(KEY, reaction, disruption),))


def test_percentiles_are_the_cores_over_one_value_per_run() -> None:
    runs = [facts("aws", f"r{i}", float(i), disruption=i / 10) for i in range(100)]
    entries = aggregate(runs, min_runs=100)
    reaction, disruption = entries
    assert (reaction.platform, reaction.key, reaction.metric) == ("aws", KEY, "reaction")
    assert (reaction.p50, reaction.p75, reaction.p95, reaction.p99) == (49.5, 74.25, 94.05, 98.01)
    assert reaction.p99 == percentile_cont(range(100), 0.99)
    assert (reaction.runs, reaction.usable, reaction.allowed) == (100, True, 99.0)
    assert disruption.metric == "disruption"
    assert disruption.p99 == pytest.approx(9.801)
    assert disruption.allowed == 10.0


def test_what_a_run_contributes() -> None:
    runs = [
        facts("aws", "no-shutdown", None, windows=0),  # no window: no reaction value
        facts("aws", "no-late", None),  # windows but no late request: 0 s
        facts("aws", "early", -0.01),  # sent just before T0: 0 s
        facts("aws", "late", 7.0),
    ]
    reaction = next(e for e in aggregate(runs, min_runs=1) if e.metric == "reaction")
    assert reaction.runs == 3
    assert (reaction.p50, reaction.p99) == (0.0, pytest.approx(6.86))
    disruption = next(e for e in aggregate(runs, min_runs=1) if e.metric == "disruption")
    assert disruption.runs == 4


def test_keys_with_too_few_runs_are_kept_but_unusable_and_allowed_is_at_least_one() -> None:
    entries = aggregate([facts("gcp", f"r{i}", 0.2) for i in range(99)], min_runs=100)
    assert all(not e.usable and e.runs == 99 for e in entries)
    assert entries[0].allowed == 1.0


def test_pooled_entries_only_when_two_platforms_are_there() -> None:
    one = aggregate([facts("aws", f"r{i}", 1.0) for i in range(3)], min_runs=1)
    assert {e.platform for e in one} == {"aws"}
    two = aggregate(
        [facts("AWS", "a", 1.0), facts("gcp", "b", 3.0), facts("gcp", "c", 5.0)], min_runs=1
    )
    assert [e.platform for e in two if e.metric == "reaction"] == ["aws", "gcp", "all"]
    pooled = next(e for e in two if e.platform == "all" and e.metric == "reaction")
    assert (pooled.runs, pooled.p50) == (3, 3.0)


def _entry(platform: str, runs: int, p99: float, usable: bool = True) -> Entry:
    return Entry(platform, *KEY, "reaction", 1.0, 2.0, 3.0, p99, runs, usable)


def test_lookup_falls_back_from_the_platform_to_all_platforms_and_says_which() -> None:
    thresholds = Thresholds(
        [_entry("aws", 150, 4.2), _entry("gcp", 30, 9.0, usable=False), _entry("all", 400, 6.5)]
    )
    exact = thresholds.lookup("AWS", KEY, "reaction")
    assert (exact.allowed, exact.source) == (5.0, "P99 of 150 aws runs")
    fallback = thresholds.lookup("gcp", KEY, "reaction")
    assert fallback.allowed == 7.0
    assert fallback.source == "P99 of 400 runs on all platforms (30 gcp runs, too few)"
    unknown = thresholds.lookup("azure", KEY, "reaction")
    assert unknown.source == "P99 of 400 runs on all platforms (no azure history)"
    missing = thresholds.lookup("aws", OTHER, "reaction")
    assert missing.entry is None
    assert missing.source == (
        "no usable history for aws external-lb/http1/reused reaction: no aws history; "
        "no pooled history"
    )


def _history_docs(platform: str, n: int) -> list[dict]:
    return [
        summary_doc(f"r{i}", platform, lambda key, i=i: float(i % 10), lambda key: 0.5)
        for i in range(n)
    ]


def test_the_command_writes_thresholds_and_a_dashboard(tmp_path: Path, capsys) -> None:
    write_history(tmp_path / "h" / "aws", _history_docs("aws", 120))
    write_history(tmp_path / "h" / "gcp", _history_docs("gcp", 40))
    (tmp_path / "h" / "gcp" / "nested").mkdir()
    (tmp_path / "h" / "gcp" / "nested" / "summary.json").write_text(
        json.dumps(summary_doc("x", "gcp", lambda k: 1.0, lambda k: 0.0))
    )
    out, target = tmp_path / "new" / "dir", tmp_path / "t" / "thresholds.json"
    files = sorted((tmp_path / "h").rglob("*.json"))
    code = main(["thresholds", *map(str, files), "-o", str(target), "--out", str(out)])
    assert code == 0
    doc = json.loads(target.read_text())
    assert list(doc) == ["v", "entries"]
    assert list(doc["entries"][0]) == [
        "platform",
        "lb",
        "protocol",
        "connection",
        "metric",
        "p50",
        "p75",
        "p95",
        "p99",
        "runs",
        "usable",
    ]
    assert {(e["platform"], e["runs"], e["usable"]) for e in doc["entries"]} == {
        ("aws", 120, True),
        ("gcp", 41, False),
        ("all", 161, True),
    }
    assert load_thresholds(target).lookup("gcp", KEY, "reaction").entry.platform == "all"
    html = (out / "thresholds.html").read_text()
    assert "reaction: seconds from T0" in html
    printed = capsys.readouterr().out
    assert f"wrote {target}" in printed
    assert f"wrote {out / 'thresholds.html'}" in printed


def test_a_directory_is_searched_for_summary_json_and_duplicates_count_once(
    tmp_path: Path, capsys
) -> None:
    for i in range(3):
        run = tmp_path / "runs" / f"job{i}"
        run.mkdir(parents=True)
        doc = summary_doc(f"r{i % 2}", "aws", lambda k: 1.0, lambda k: 0.0)
        (run / "summary.json").write_text(json.dumps(doc))
    assert main(["thresholds", str(tmp_path / "runs"), "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "thresholds.json").read_text())
    assert {e["runs"] for e in doc["entries"]} == {2}
    [warning] = capsys.readouterr().err.splitlines()
    assert warning.endswith(
        "job2/summary.json: run r0 already read from "
        + str(tmp_path / "runs" / "job0" / "summary.json")
        + ": skipped"
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            "{",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ('{"v": 4}', "summary version 4, this reader knows 1, 2 and 3"),
        ('{"v": "2"}', "summary version '2', this reader knows 1, 2 and 3"),
        ('{"v": 2.0}', "summary version 2.0, this reader knows 1, 2 and 3"),
        ('{"run_id": "r"}', "summary version None, this reader knows 1, 2 and 3"),
        (
            '{"v": 2, "run_id": "r", "platform": "aws", "windows": [], "worst": [{"lb": '
            '"localhost", "protocol": "http1", "connection": "new", "reaction": 1.5, '
            '"reaction_lo": "low", "reaction_hi": 2, "disruption_seconds": 0}]}',
            "worst[0].reaction_lo: expected a number, got 'low'",
        ),
        (  # a v2 summary states its bound, if only as null
            '{"v": 2, "run_id": "r", "platform": "aws", "windows": [], "worst": [{"lb": '
            '"localhost", "protocol": "http1", "connection": "new", "reaction": 1.5, '
            '"reaction_lo": 1.2, "disruption_seconds": 0}]}',
            "worst[0].reaction_hi: expected a number, got None",
        ),
        (
            '{"v": 1, "run_id": "r", "platform": "aws", "windows": [], "worst": [{"lb": "x"}]}',
            "worst[0]: 'x' is not a valid LB",
        ),
        (
            '{"v": 1, "run_id": "r", "platform": "aws", "windows": [], "worst": [{"lb": '
            '"localhost", "protocol": "http1", "connection": "new", "reaction": "fast", '
            '"disruption_seconds": 0}]}',
            "worst[0].reaction: expected a number, got 'fast'",
        ),
    ],
)
def test_bad_summaries_exit_2_with_one_line(tmp_path: Path, capsys, content, problem) -> None:
    bad = tmp_path / "summary.json"
    bad.write_text(content)
    assert main(["thresholds", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"prober thresholds: {bad}: {problem}\n"


def test_a_missing_summary_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["thresholds", str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err == f"prober thresholds: {tmp_path / 'nope.json'}: no such file\n"


def test_v1_and_v2_summaries_are_read_alike_and_only_v2_has_bounds(tmp_path: Path) -> None:
    docs = [summary_doc(f"r{v}", "aws", lambda k: 2.0, lambda k: 0.5, version=v) for v in (1, 2)]
    assert "reaction_lo" not in docs[0]["worst"][0]
    v1, v2 = (load_run_facts(path) for path in write_history(tmp_path, docs))
    assert [(w.key, w.reaction, w.disruption_seconds) for w in v1.worst] == [
        (w.key, w.reaction, w.disruption_seconds) for w in v2.worst
    ]
    assert {(w.reaction_lo, w.reaction_hi) for w in v1.worst} == {(None, None)}
    assert {(w.reaction_lo, w.reaction_hi) for w in v2.worst} == {(1.75, 2.5)}


def test_a_history_of_v1_and_v2_summaries_gives_the_thresholds_of_its_points(
    tmp_path: Path,
) -> None:
    # The thresholds are made of point values: the bounds of v2 summaries change nothing.
    def thresholds(name: str, version_of) -> str:
        docs = [
            summary_doc(
                f"r{i}", "aws", lambda k, i=i: float(i), lambda k: 0.5, version=version_of(i)
            )
            for i in range(20)
        ]
        paths = write_history(tmp_path / name, docs)
        out = tmp_path / name / "out"
        assert main(["thresholds", *map(str, paths), "--out", str(out)]) == 0
        return (out / "thresholds.json").read_text()

    assert thresholds("mixed", lambda i: 1 + i % 2) == thresholds("v1", lambda i: 1)


GOOD_ROW = {
    "platform": "aws", "lb": "internal-lb", "protocol": "http2", "connection": "new",
    "metric": "reaction", "p50": 1.0, "p75": 1.5, "p95": 2.0, "p99": 3.0, "runs": 20,
    "usable": True,
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"v": true, "entries": []}', "thresholds version True, this reader knows 1"),
        ('{"v": 1.0, "entries": []}', "thresholds version 1.0, this reader knows 1"),
        ('{"v": 1, "entries": {}}', "field 'entries': expected a list"),
        (json.dumps({"v": 1, "entries": [{**GOOD_ROW, "p99": None}]}),
         "entries[0].p99: expected a number, got None"),
        (json.dumps({"v": 1, "entries": [{**GOOD_ROW, "runs": 0}]}),
         "entries[0].runs: expected a positive integer, got 0"),
        (json.dumps({"v": 1, "entries": [{**GOOD_ROW, "usable": "yes"}]}),
         "entries[0].usable: expected true or false, got 'yes'"),
        (json.dumps({"v": 1, "entries": [{**GOOD_ROW, "platform": ""}]}),
         "entries[0].platform: expected a platform name, got ''"),
    ],
)  # fmt: skip
def test_a_bad_thresholds_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "thresholds.json"
    path.write_text(text)
    with pytest.raises(BadInput) as caught:
        load_thresholds(path)
    assert str(caught.value) == f"{path}: {problem}"


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_a_non_finite_number_names_the_line_and_field(tmp_path: Path, number: float) -> None:
    path = tmp_path / "thresholds.json"
    text = json.dumps({"v": 1, "entries": [{**GOOD_ROW, "p99": number}]}, indent=1)
    path.write_text(text)
    with pytest.raises(BadInput) as caught:
        load_thresholds(path)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if '"p99"' in t)
    shown = json.dumps(number)
    assert (
        str(caught.value) == f"{path}:{line}: entries[0].p99: expected a finite number, got {shown}"
    )


def test_a_good_row_loads(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"v": 1, "entries": [GOOD_ROW]}))
    assert load_thresholds(path).lookup("aws", KEY, "reaction").entry.p99 == 3.0


ROW_ENTRY = Entry("gcp", *KEY, "reaction", 1.0, 2.0, 3.0, 4.5, runs=7, usable=True)
# A value of the wrong kind for each field of the one declaration, and the words it draws.
WRONG = {
    "platform": ("", "expected a platform name"),
    "lb": ("nlb", "'nlb' is not a valid LB"),
    "protocol": ("http3", "'http3' is not a valid Protocol"),
    "connection": (None, "missing 'connection'"),
    "metric": ("latency", "'latency' is not one of ['reaction', 'disruption']"),
    "p50": ("1", "expected a number"),
    "p75": (float("nan"), "expected a number"),
    "p95": (True, "expected a number"),
    "p99": (None, "expected a number"),
    "runs": (0, "expected a positive integer"),
    "usable": (1, "expected true or false"),
}


def test_a_row_is_written_and_read_back_by_the_entrys_own_fields() -> None:
    row = to_row(ROW_ENTRY)
    assert list(row) == [f.name for f in fields(Entry)]
    assert row["lb"] == "internal-lb"
    assert from_row(json.loads(json.dumps({**row, "platform": "GCP"})), "here") == ROW_ENTRY


@pytest.mark.parametrize("name", [f.name for f in fields(Entry)])
def test_every_field_of_a_row_is_checked_by_its_declared_type(name: str) -> None:
    assert set(WRONG) == {f.name for f in fields(Entry)}
    value, words = WRONG[name]
    row: dict[str, object] = {**to_row(ROW_ENTRY), name: value}
    if value is None and name == "connection":
        del row[name]
    with pytest.raises(BadInput, match=re.escape(words)):
        from_row(row, "here")
