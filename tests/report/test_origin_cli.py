"""`prober origin` on what it may be given, `write_origin_files` called directly, and
`prober thresholds --from-query-result` on origin's query_results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from prober.cli import COMMANDS, main
from prober.report.ci.origin import write_origin_files
from prober.report.schema.errors import BadInput
from prober.report.schema.types import SummaryDocument
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.rollout import NODES, streams

FIXTURES = Path(__file__).parent / "origin"
STAMP = "20261130-100000"


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory, rollout_samples) -> Path:
    base = tmp_path_factory.mktemp("origin-cli")
    log = base / "events.jsonl"
    write_daemon_log(log, run_record(streams()), rollout_samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(base / "analysis")]) == 1
    return base / "analysis" / "summary.json"


def document(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def test_the_command_is_listed_after_export_and_says_how(capsys) -> None:
    assert COMMANDS[COMMANDS.index("export") + 1] == "origin"
    with pytest.raises(SystemExit) as exited:
        main(["origin", "--help"])
    assert exited.value.code == 0
    assert "prober origin artifacts/prober/summary.json --out" in capsys.readouterr().out


def test_a_run_without_windows_or_disruption_writes_what_it_has(summary, tmp_path) -> None:
    doc = document(summary)
    doc["windows"] = []
    doc.pop("restarts")  # no shutdown, no restart
    for stream in doc["streams"]:
        stream["intervals"], stream["disruption_seconds"] = [], 0.0
    written = write_origin_files(cast(SummaryDocument, doc), tmp_path / "quiet")
    assert [p.name for p in written] == [
        f"e2e-timelines_prober_{STAMP}.json",
        f"backend-disruption_prober_{STAMP}.json",
        f"prober-stream-{STAMP}-autodl.json",  # no shutdown, interval nor restart rows
    ]
    assert sorted(p.name for p in (tmp_path / "quiet").iterdir()) == sorted(
        p.name for p in written
    )  # and no partial file left behind
    assert document(written[0]) == {"items": []}
    entries = document(written[1])["BackendDisruptions"].values()
    assert {e["DisruptedDuration"] for e in entries} == {"0s"}
    assert all(e["DisruptionMessages"] == [] for e in entries)
    rows = document(written[2])["rows"]
    assert all("upgrade" not in r and r["windows"] == "0" for r in rows)  # nulls left out


def test_labels_go_into_the_autodl_rows(summary, tmp_path) -> None:
    doc = cast(SummaryDocument, document(summary))
    labels = {"upgrade": False, "network_type": "OVNKubernetes"}
    write_origin_files(doc, tmp_path, labels=labels)
    rows = document(tmp_path / f"prober-stream-{STAMP}-autodl.json")["rows"]
    assert {(r["upgrade"], r["network_type"]) for r in rows} == {("false", "OVNKubernetes")}


def test_a_summary_document_without_its_start_is_named_by_its_run(summary, tmp_path) -> None:
    doc = document(summary)
    del doc["started"]
    with pytest.raises(BadInput) as raised:
        write_origin_files(cast(SummaryDocument, doc), tmp_path)
    assert str(raised.value) == (
        "summary of run 'run-1': no 'started' (written before summaries carried the run's "
        "start time): run prober analyze on its event log again"
    )
    assert not list(tmp_path.iterdir())


def test_several_summaries_write_one_directory_each(summary, tmp_path, capsys) -> None:
    for run_id in ("run-a", "run/b"):
        doc = document(summary)
        doc["run_id"] = run_id
        (tmp_path / "in" / run_id).mkdir(parents=True)
        (tmp_path / "in" / run_id / "summary.json").write_text(json.dumps(doc))
    assert main(["origin", str(tmp_path / "in"), "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run-a", "run_b"]
    assert len(list((tmp_path / "out" / "run_b").iterdir())) == 6
    out = capsys.readouterr().out
    assert out.count("wrote ") == 12
    assert f"wrote {tmp_path}/out/run-a/e2e-timelines_prober_{STAMP}.json\n" in out


def _summary_with(summary: Path, tmp_path: Path, change: str) -> tuple[Path, int]:
    doc = document(summary)
    failing = next(i for i, s in enumerate(doc["streams"]) if s["intervals"])
    if change == "no-started":
        del doc["started"]
    elif change == "bad-lb":
        doc["streams"][0]["lb"] = "nowhere"
    elif change == "bad-version":
        doc["v"] = 7
    elif change == "bad-interval":
        doc["streams"][failing]["intervals"][0]["end_t"] = "soon"
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(doc))
    return path, failing


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no-started", "{path}: no 'started' (written before summaries carried the run's start "
                       "time): run prober analyze on its event log again"),
        ("bad-lb", "{path}: streams[0]: 'nowhere' is not a valid LB"),
        ("bad-version", "{path}: summary version 7, this reader knows 1, 2 and 3"),
        ("bad-interval", "{path}: streams[{i}].intervals[0].end_t: expected a number, got "
                         "'soon'"),
    ],
)  # fmt: skip
def test_a_bad_summary_is_one_line_naming_the_file_and_field_and_exit_2(
    summary, tmp_path, capsys, change: str, message: str
) -> None:
    path, failing = _summary_with(summary, tmp_path, change)
    assert main(["origin", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"prober origin: {message.format(path=path, i=failing)}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/missing.json"], "{tmp}/missing.json: no such file"),
        (["{tmp}"], "{tmp}: no summary.json in this directory"),
        (["{tmp}/not-json.json"], "{tmp}/not-json.json: not JSON: Expecting value: line 1 "
                                  "column 1 (char 0)"),
        (["{summary}", "--label", "colour=blue"], "--label 'colour=blue': expected KEY=VALUE "
         "with KEY one of network_type, topology, upgrade, release, job_name, job_run_id"),
        (["{summary}", "--label", "upgrade=maybe"], "--label 'upgrade=maybe': expected true "
                                                    "or false"),
        (["{summary}", "--out", "{tmp}/a-file"], "cannot write into {tmp}/a-file: File exists"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    summary, tmp_path, capsys, args: list[str], message: str
) -> None:
    (tmp_path / "not-json.json").write_text("")
    (tmp_path / "a-file").write_text("")
    values = {"tmp": str(tmp_path), "summary": str(summary)}
    argv = ["origin", *(a.format(**values) for a in args)]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"prober origin: {message.format(**values)}\n"


def test_origins_query_result_gives_the_probers_entries_only(tmp_path, capsys) -> None:
    result = FIXTURES / "query_results.json"
    args = ["thresholds", "--from-query-result", str(result), "--out", str(tmp_path)]
    assert main([*args, "--min-runs", "100"]) == 0
    doc = document(tmp_path / "thresholds.json")
    assert "period" not in doc  # origin's file does not say which runs it covers
    assert doc["entries"] == [
        _entry("aws", "internal-lb http2 new", 412, (0.0, 0.5, 2.0, 3.25)),
        _entry("aws", "localhost http2 reused", 12, (0.0, 0.0, 0.0, 0.0)),
        _entry("gcp", "external-lb http1 reused", 150, (1.0, 2.0, 4.0, 7.5)),
    ]
    err = capsys.readouterr().err
    assert err == (
        f"note: {result}: skipped 3 rows of 3 backends not the prober's (origin's own, e.g. "
        "aws-network-liveness-new-connections)\n"
        f"note: {result}: skipped 1 rows of the prober's without a Platform\n"
        f"note: {result}: 2 rows of a platform x LB x protocol x connection read before "
        "(another release, architecture, network, topology or target): kept the row of the "
        "most job runs\n"
    )


def _entry(
    platform: str, key: str, runs: int, p: tuple[float, float, float, float]
) -> dict[str, Any]:
    lb, protocol, connection = key.split()
    return {"platform": platform, "lb": lb, "protocol": protocol, "connection": connection,
            "metric": "disruption", "p50": p[0], "p75": p[1], "p95": p[2], "p99": p[3],
            "runs": runs, "usable": runs >= 100}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"JobRuns": None}, "row 3: no column 'JobRuns' (is this origin's query_results.json?)"),
        ({"JobRuns": "many"}, "row 3.JobRuns: expected a positive integer, got 'many'"),
        ({"P99": "high"}, "row 3.P99: expected a number, got 'high'"),
        ({"Platform": 4}, "row 3.Platform: expected a string, got 4"),
    ],
)
def test_a_bad_origin_row_of_ours_is_one_line_and_exit_2(
    tmp_path, capsys, change: dict[str, Any], message: str
) -> None:
    rows = document(FIXTURES / "query_results.json")
    for key, value in change.items():
        if value is None:
            del rows[3][key]
        else:
            rows[3][key] = value
    path = tmp_path / "query_results.json"
    path.write_text(json.dumps(rows))
    assert main(["thresholds", "--from-query-result", str(path), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"prober thresholds: {path}: {message}\n"


def test_origins_own_rows_alone_are_no_thresholds(tmp_path, capsys) -> None:
    path = tmp_path / "query_results.json"
    path.write_text(json.dumps(document(FIXTURES / "query_results.json")[:3]))
    assert main(["thresholds", "--from-query-result", str(path), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"prober thresholds: {path}: none of its 3 rows is a prober backend (prober-<stream>)\n"
    )


@pytest.mark.parametrize("kind", ["--events", "--pod-logs"])
def test_event_and_pod_logs_give_the_files_their_summary_gives(
    summary, tmp_path, kind: str
) -> None:
    """One command from event logs or summaries: the replay is `prober analyze`'s, so the
    files equal those written from the summary it writes."""
    log = summary.parent.parent / "events.jsonl"
    source = log
    if kind == "--pod-logs":  # the records as a container's stdout holds them, CRI prefixed
        source = tmp_path / "prober.log"
        lines = log.read_bytes().splitlines(keepends=True)
        source.write_bytes(b"".join(b"2026-11-30T10:00:00Z stdout F " + ln for ln in lines))
    assert main(["origin", str(summary), "--out", str(tmp_path / "from-summary")]) == 0
    assert main(["origin", kind, str(source), "--out", str(tmp_path / "from-log")]) == 0
    expected = sorted((tmp_path / "from-summary").iterdir())
    found = sorted((tmp_path / "from-log").iterdir())
    assert [p.name for p in found] == [p.name for p in expected]
    for mine, theirs in zip(found, expected, strict=True):
        assert document(mine) == document(theirs)
