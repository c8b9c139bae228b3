"""Every offline command against malformed input of every kind: one line naming the file and
what is wrong, and exit 2 (or the input still made sense: 0 or 1), never a traceback.

One mutation test: valid inputs (an event log, a summary, thresholds, a query result, an
audit log and its shutdown events) each damaged in every way below, at several places, and
each command that reads them run on every damaged copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from prober.cli import main
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.rollout import NODES, streams
from tests.support import auditlog

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 400
VALUES: dict[str, str] = {
    "nan": "NaN",
    "infinity": "-Infinity",
    "huge int": HUGE,
    "deep": DEEP,
    "list": "[]",
    "object": "{}",
    "string": '"x"',
    "null": "null",
    "true": "true",
}


def _replace_values(doc: Any, path: tuple[Any, ...], value: str) -> str:
    """The document's JSON with the value at `path` replaced by the raw JSON `value`."""
    marker = "\x00MUTATION\x00"
    target = doc
    for key in path[:-1]:
        target = target[key]
    saved = target[path[-1]]
    target[path[-1]] = marker
    text = json.dumps(doc).replace(json.dumps(marker), value)
    target[path[-1]] = saved
    return text


def _paths(doc: Any, limit: int = 12) -> list[tuple[Any, ...]]:
    """Up to `limit` places, first of every top-level key, then one level down."""
    found: list[tuple[Any, ...]] = []
    items = list(doc.items()) if isinstance(doc, dict) else list(enumerate(doc))
    for key, value in items:
        found.append((key,))
        if isinstance(value, dict):
            found += [(key, sub) for sub in list(value)[:2]]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            found += [(key, 0, sub) for sub in list(value[0])[:2]]
    return found[:limit]


def mutations(text: str, places: int = 12) -> Iterator[tuple[str, bytes]]:
    """(what, damaged bytes) of one JSON document, at up to `places` places."""
    doc = json.loads(text)
    for path in _paths(doc, places):
        for name, value in VALUES.items():
            yield f"{'.'.join(map(str, path))}={name}", _replace_values(doc, path, value).encode()
    yield "truncated", text.encode()[: len(text) // 2]
    yield "binary", b"\x00\xff\xfe" + text.encode()[:40] + b"\x80\x81"
    yield "deep document", DEEP.encode()
    yield "empty", b""


def line_mutations(lines: list[bytes]) -> Iterator[tuple[str, bytes]]:
    """Each damage on one line of a JSON Lines file, the others left whole: the run record,
    and a line in the middle."""
    for index in (0, len(lines) // 2):
        for what, damaged in mutations(lines[index].decode(), places=8):
            yield (
                f"line {index}: {what}",
                b"".join([*lines[:index], damaged + b"\n", *lines[index + 1 :]]),
            )


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)  # an exception here is the traceback a user would have seen
    return code, capsys.readouterr().err


def _judge(what: str, code: int, err: str, command: str) -> None:
    assert code in (0, 1, 2), (what, code, err)
    if code == 2:
        errors = [line for line in err.splitlines() if not line.startswith(("note:", "warning:"))]
        assert len(errors) == 1, (what, err)
        assert errors[0].startswith(f"prober {command}: "), (what, err)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, rollout_samples) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hostile")
    log = base / "events.jsonl"
    write_daemon_log(log, run_record(streams()), rollout_samples[:3000], nodes=NODES)
    assert main(["analyze", str(log), "--out", str(base / "run")]) in (0, 1)
    thresholds = base / "thresholds.json"
    argv = ["thresholds", str(base / "run"), "--out", str(base), "--min-runs", "1"]
    assert main(argv) == 0
    audit = auditlog.write(base / "audit.log", auditlog.event(1.0), auditlog.event(2.0))
    shutdowns = base / "shutdowns.json"
    shutdowns.write_text(json.dumps({"items": [{"kind": "Event", "reason": "ShutdownInitiated",
        "involvedObject": {"namespace": "openshift-kube-apiserver"}, "source": {"host": "m0"},
        "firstTimestamp": "2026-12-01T10:00:00Z"}]}))  # fmt: skip
    query = base / "query.json"
    query.write_text(json.dumps([{
        "platform": "aws", "lb": "internal-lb", "protocol": "http1", "connection": "new",
        "metric": "reaction", "p50": "1.0", "p75": "1.5", "p95": "2.0", "p99": "2.5",
        "runs": "10", "period_start": "2026-11-01 00:00:00 UTC",
        "period_end": "2026-12-01 00:00:00 UTC",
    }]))  # fmt: skip
    return {
        "events": log,
        "summary": base / "run" / "summary.json",
        "thresholds": thresholds,
        "audit": audit,
        "shutdowns": shutdowns,
        "query": query,
    }


Command = Callable[[Path, Path], list[str]]
DOCUMENT_COMMANDS: dict[str, list[tuple[str, Command]]] = {
    "summary": [
        ("thresholds", lambda f, o: ["thresholds", str(f), "--out", str(o)]),
        ("export", lambda f, o: ["export", str(f), "-o", str(o / "rows.jsonl")]),
        ("origin", lambda f, o: ["origin", str(f), "--out", str(o / "origin")]),
    ],
    "thresholds": [
        ("recommend", lambda f, o: ["recommend", "--thresholds", str(f), "--out", str(o)]),
    ],
    "query": [
        ("thresholds", lambda f, o: ["thresholds", "--from-query-result", str(f), "--out", str(o)]),
    ],
}


@pytest.mark.parametrize("kind", list(DOCUMENT_COMMANDS))
def test_damaged_documents_are_one_line_and_exit_2(inputs, kind, tmp_path, capsys) -> None:
    original = inputs[kind].read_text()
    for index, (what, damaged) in enumerate(mutations(original)):
        path = tmp_path / f"{index}-{inputs[kind].name}"
        path.write_bytes(damaged)
        for command, argv in DOCUMENT_COMMANDS[kind]:
            out = tmp_path / f"out-{index}-{command}"
            code, err = _run(argv(path, out), capsys)
            _judge(f"{kind} {what}", code, err, command)


def test_damaged_event_logs_are_one_line_and_exit_2(inputs, tmp_path, capsys) -> None:
    lines = inputs["events"].read_bytes().splitlines(keepends=True)
    for index, (what, damaged) in enumerate(line_mutations(lines)):
        path = tmp_path / f"{index}.jsonl"
        path.write_bytes(damaged)
        out = tmp_path / f"out-{index}"
        code, err = _run(["analyze", str(path), "--out", str(out)], capsys)
        _judge(f"event log {what}", code, err, "analyze")
        code, err = _run(["origin", "--events", str(path), "--out", str(out / "o")], capsys)
        _judge(f"event log {what}", code, err, "origin")


def test_damaged_thresholds_for_analyze_are_one_line(inputs, tmp_path, capsys) -> None:
    original = inputs["thresholds"].read_text()
    for index, (what, damaged) in enumerate(mutations(original)):
        path = tmp_path / f"{index}.json"
        path.write_bytes(damaged)
        argv = ["analyze", str(inputs["events"]), "--thresholds", str(path), "--out",
                str(tmp_path / f"out-{index}")]  # fmt: skip
        code, err = _run(argv, capsys)
        _judge(f"thresholds {what}", code, err, "analyze")


def test_damaged_audit_inputs_are_one_line(inputs, tmp_path, capsys) -> None:
    lines = inputs["audit"].read_bytes().splitlines(keepends=True)
    for index, (what, damaged) in enumerate(line_mutations(lines)):
        path = tmp_path / f"{index}.log"
        path.write_bytes(damaged)
        code, err = _run(["audit", "summarize", str(path), "--out", str(tmp_path / "a")], capsys)
        _judge(f"audit log {what}", code, err, "audit summarize")
    original = inputs["shutdowns"].read_text()
    for index, (what, damaged) in enumerate(mutations(original)):
        path = tmp_path / f"{index}-shutdowns.json"
        path.write_bytes(damaged)
        argv = ["audit", "summarize", str(inputs["audit"]), "--shutdown-events", str(path),
                "--events", str(inputs["events"]), "--out", str(tmp_path / "b")]  # fmt: skip
        code, err = _run(argv, capsys)
        _judge(f"shutdown events {what}", code, err, "audit summarize")


def test_an_out_that_is_a_file_is_one_line(inputs, tmp_path, capsys) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    code, err = _run(["analyze", str(inputs["events"]), "--out", str(taken)], capsys)
    assert code == 2
    assert err.splitlines()[-1].startswith(f"prober analyze: cannot write into {taken}")
