"""One set of rules for every file the prober wrote and reads back (docs/ARCHITECTURE.md
section 4), applied by every command alike: each reading command below is run over the same
bad inputs and must give the same one line, exit 2; a torn last line and an unknown kind are
skipped and counted. A command added to `prober` must be listed here, as a reader of one kind
of file or as none, or `test_every_command_is_held_to_the_rules` fails (issue 33: `audit
summarize --events` skipped a NaN line that `analyze` refused)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from prober.cli import build_parser, main

RUN = (
    '{"v":1,"kind":"run","run_id":"r1","ts":"2026-11-30T00:00:00.000000Z","platform":"aws",'
    '"streams":["kube-api-http1-localhost-new-connections"],"version":"0"}'
)
SAMPLE = {
    "v": 1, "kind": "sample", "ts": "2026-11-30T00:00:01.000000Z", "t": 1.0, "dur": 0.01,
    "stream": "kube-api-http1-localhost-new-connections", "target": "kube-api",
    "lb": "localhost", "protocol": "http1", "connection": "new", "reused": None,
    "http_version": "1.1", "status": 200, "error": None, "detail": "", "shutdown": None,
    "audit_id": "a1",
}  # fmt: skip


def sample(**changes: object) -> str:
    body = {**SAMPLE, **changes}
    return json.dumps({k: v for k, v in body.items() if v != "<drop>"}, separators=(",", ":"))


# Line 2 is bad, line 3 good: a bad line is no torn last line.
BAD_EVENT_LINES = {
    "nan": (sample().replace('"t":1.0', '"t":NaN'), "sample.t: expected a finite number, got NaN"),
    "infinite": (
        sample().replace('"dur":0.01', '"dur":1e400'),
        "sample.dur: expected a finite number, got 1e400",
    ),
    "wrong type": (sample(status="200"), "sample.status: expected an integer, got '200'"),
    "missing field": (sample(dur="<drop>"), "sample: missing field 'dur'"),
    "not json": (
        "{",
        "not JSON: Expecting property name enclosed in double quotes: line 2 column 1 (char 2)",
    ),
}
SKIPPED_EVENT_LINES = {
    "torn last line": [RUN, sample(), sample()[:40]],
    "unknown kind": [RUN, '{"v":1,"kind":"weather","sunny":true}', sample()],
}

Argv = Callable[[Path, Path], list[str]]
EVENT_LOG_READERS: dict[str, Argv] = {
    "analyze": lambda log, tmp: ["analyze", str(log), "--out", str(tmp / "out")],
    "analyze --pod-logs": lambda log, tmp: ["analyze", "--pod-logs", str(log), "--out",
                                            str(tmp / "out")],
    "audit summarize": lambda log, tmp: ["audit", "summarize", str(audit_log(tmp)), "--events",
                                         str(log), "--out", str(tmp / "out")],
    "origin": lambda log, tmp: ["origin", "--events", str(log), "--out", str(tmp / "out")],
}  # fmt: skip
SUMMARY_READERS: dict[str, Argv] = {
    "thresholds": lambda path, tmp: ["thresholds", str(path), "--out", str(tmp / "out")],
    "thresholds --check": lambda path, tmp: ["thresholds", "--check", str(thresholds(tmp)),
                                             str(path), "--out", str(tmp / "out")],
    "export": lambda path, tmp: ["export", str(path), "--out", str(tmp / "out")],
    "origin": lambda path, tmp: ["origin", str(path), "--out", str(tmp / "out")],
}  # fmt: skip
THRESHOLDS_READERS: dict[str, Argv] = {
    "recommend": lambda path, tmp: ["recommend", "--thresholds", str(path)],
    "dashboard": lambda path, tmp: ["dashboard", str(path), "--out", str(tmp / "out")],
    "analyze --thresholds": lambda path, tmp: ["analyze", str(event_log(tmp)), "--thresholds",
                                               str(path), "--out", str(tmp / "out")],
    "thresholds --check": lambda path, tmp: ["thresholds", "--check", str(path),
                                             str(summary(tmp)), "--out", str(tmp / "out")],
}  # fmt: skip
ROWS_READERS: dict[str, Argv] = {
    "thresholds --from-query-result": lambda path, tmp: [
        "thresholds", "--from-query-result", str(path), "--out", str(tmp / "out")],
}  # fmt: skip
# What the other commands read is not the prober's own writing: a configuration (`run`, with
# its own tests in tests/config), the apiserver's audit logs (`audit follow`, counted
# `bad_lines`), or nothing (`lab` makes its own cluster).
NOT_READERS = {"run", "lab", "audit follow"}


def audit_log(tmp: Path) -> Path:
    path = tmp / "audit.log"
    path.touch()
    return path


def event_log(tmp: Path) -> Path:
    path = tmp / "good.jsonl"
    path.write_text(RUN + "\n" + sample() + "\n")
    return path


def summary(tmp: Path) -> Path:
    assert main(["analyze", str(event_log(tmp)), "--out", str(tmp / "analyzed")]) == 0
    return tmp / "analyzed" / "summary.json"


def thresholds(tmp: Path) -> Path:
    assert main(["thresholds", str(summary(tmp)), "--out", str(tmp / "history")]) == 0
    return tmp / "history" / "thresholds.json"


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= commands(sub, f"{prefix}{name} ") or {prefix + name}
    return found


def test_every_command_is_held_to_the_rules() -> None:
    listed = {
        name.partition(" --")[0]
        for readers in (EVENT_LOG_READERS, SUMMARY_READERS, THRESHOLDS_READERS, ROWS_READERS)
        for name in readers
    }
    assert commands(build_parser()) == listed | NOT_READERS


@pytest.mark.parametrize("command", EVENT_LOG_READERS)
@pytest.mark.parametrize("case", BAD_EVENT_LINES)
def test_a_bad_event_log_line_is_one_line_and_exit_2_for_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str
) -> None:
    if command.endswith("--pod-logs") and case == "not json":
        pytest.skip("in a pod log, a line that is no record is one of the daemon's log lines")
    line, problem = BAD_EVENT_LINES[case]
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([RUN, line, sample()]) + "\n")
    argv = EVENT_LOG_READERS[command](log, tmp_path)
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == f"prober {argv[0]}{sub(argv)}: {log}:2: {problem}\n"


@pytest.mark.parametrize("command", EVENT_LOG_READERS)
@pytest.mark.parametrize("case", SKIPPED_EVENT_LINES)
def test_a_torn_last_line_and_an_unknown_kind_are_skipped_by_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str
) -> None:
    log = tmp_path / "events.jsonl"
    lines = SKIPPED_EVENT_LINES[case]
    log.write_text("\n".join(lines) + ("" if case == "torn last line" else "\n"))
    argv = EVENT_LOG_READERS[command](log, tmp_path)
    assert main(argv) == 0
    err = capsys.readouterr().err
    if argv[0] == "analyze":
        kinds = (
            "1 of unknown kinds, 0 truncated"
            if case == "unknown kind"
            else "0 of unknown kinds, 1 truncated"
        )
        assert err.startswith(f"note: skipped 1 of 3 lines in 1 files ({kinds})\n")
    elif argv[0] == "audit":
        written = json.loads((tmp_path / "out" / "audit-summary.json").read_text())
        assert written["prober"]["skipped_lines"] == 1


def sub(argv: list[str]) -> str:
    return f" {argv[1]}" if argv[0] == "audit" else ""


def bad_summaries(good: dict[str, object]) -> dict[str, tuple[object, str]]:
    worst = dict(good["worst"][0])  # type: ignore[index]
    return {
        "nan": ({**good, "worst": [{**worst, "disruption_seconds": float("nan")}]},
                "{path}:{line}: worst[0].disruption_seconds: expected a finite number, got NaN"),
        "wrong type": ({**good, "platform": 123},
                       "{path}: field 'platform': expected a string, got 123"),
        "missing field": ({k: v for k, v in good.items() if k != "streams"},
                          "{path}: field 'streams': expected a list, got None"),
        "inner field": ({**good, "streams": [{"stream": "x"}]},
                        "{path}: streams[0]: missing 'lb'"),
        "wrong kind": ({"v": 1, "kind": "run"},
                       "{path}: an event log (prober run writes it), not a summary.json"),
    }  # fmt: skip


@pytest.mark.parametrize("command", SUMMARY_READERS)
@pytest.mark.parametrize("case", ["nan", "wrong type", "missing field", "inner field",
                                  "wrong kind"])  # fmt: skip
def test_a_bad_summary_is_one_line_and_exit_2_for_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str
) -> None:
    good = json.loads(summary(tmp_path).read_text())
    document, message = bad_summaries(good)[case]
    bad = tmp_path / "bad" / "summary.json"
    bad.parent.mkdir()
    text = json.dumps(document, indent=1)
    bad.write_text(text)
    line = next((n for n, t in enumerate(text.splitlines(), 1) if "NaN" in t), None)
    argv = SUMMARY_READERS[command](bad, tmp_path)
    capsys.readouterr()
    assert main(argv) == 2
    expected = message.format(path=bad, line=line)
    assert capsys.readouterr().err == f"prober {argv[0]}: {expected}\n"


@pytest.mark.parametrize("command", THRESHOLDS_READERS)
@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"v": 1, "entries": [{"p99": float("nan")}]},
         "{path}:1: entries[0].p99: expected a finite number, got NaN"),
        ({"v": 1, "entries": {}}, "{path}: field 'entries': expected a list"),
        ({"v": 1, "kind": "run"}, "{path}: an event log (prober run writes it), not a "
         "thresholds.json"),
    ],
)  # fmt: skip
def test_a_bad_thresholds_file_is_one_line_and_exit_2_for_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, document: object,
    message: str
) -> None:  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    argv = THRESHOLDS_READERS[command](bad, tmp_path)
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == f"prober {argv[0]}: {message.format(path=bad)}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"platform": "aws"}\n{"p99": NaN}\n', "{path}:2: p99: expected a finite number, got NaN"),
        ('[{"platform": "aws"}]', "{path}: row 0: no column 'lb' (is this thresholds.sql's "
         "result?)"),
    ],
)  # fmt: skip
def test_bad_warehouse_rows_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    bad = tmp_path / "rows.json"
    bad.write_text(text)
    argv = ROWS_READERS["thresholds --from-query-result"](bad, tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err == f"prober thresholds: {message.format(path=bad)}\n"
