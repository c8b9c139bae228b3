"""Pod logs as CI gathers them (`oc logs`, `--timestamps`, the kubelet's CRI files), from a
daemon that echoes its event records to stdout: `prober analyze --pod-logs` finds the same run
in them as in the event log itself."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.common.segments import read_lines
from prober.core.models import REQUEST, RunRecord, Summary
from prober.daemon.echo import RecordEcho
from prober.report.replay.podlogs import RecordLines

LOG_LINE = b'{"event": "sampling_pace", "pace": "window", "level": "info"}\n'
PREFIXES = [b"", b"2026-12-01T10:00:00.123456789Z ", b"2026-12-01T10:00:00Z stdout F "]


def records_of(events: Path) -> list[bytes]:
    return list(read_lines(events))  # its rotated segments, then the live file


def pod_log(records: list[bytes], prefix: bytes) -> bytes:
    """The records between the daemon's log lines, as a container's stdout holds them."""
    lines = []
    for index, record in enumerate(records):
        if index % 3 == 0:
            lines.append(prefix + LOG_LINE)
        lines.append(prefix + record)
    return b"".join(lines)


@pytest.mark.parametrize("prefix", PREFIXES, ids=["oc-logs", "timestamps", "cri"])
def test_a_pod_log_gives_the_event_logs_summary(rollout_log, tmp_path: Path, prefix) -> None:
    events, _ = rollout_log
    log = tmp_path / "pods" / "prober-abc" / "prober.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(pod_log(records_of(events), prefix))
    from_events, from_pods = tmp_path / "events-out", tmp_path / "pods-out"
    assert main(["analyze", str(events), "--out", str(from_events)]) == 1
    assert main(["analyze", "--pod-logs", str(tmp_path / "pods"), "--out", str(from_pods)]) == 1
    expected = json.loads((from_events / "summary.json").read_text())
    assert json.loads((from_pods / "summary.json").read_text()) == expected


def test_log_lines_are_passed_over_and_counted() -> None:
    lines = RecordLines([LOG_LINE, b'{"v":1,"kind":"sample"}\n', b"plain text\n"])
    assert list(lines) == [b'{"v":1,"kind":"sample"}\n']
    assert lines.passed == 2


def test_a_pod_log_without_records_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    log = tmp_path / "prober.log"
    log.write_bytes(LOG_LINE * 3)
    assert main(["analyze", "--pod-logs", str(log), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"prober analyze: no run in the pod logs: {log}: no event records "
        "(event_log_stdout off?): left out\n"
    )


def test_a_rotated_pod_log_starts_at_its_next_run_record(rollout_log, tmp_path: Path) -> None:
    """`oc logs` after the kubelet rotated: the records before the run record comes again are
    skipped and counted; the run is read from there."""
    events, _ = rollout_log
    records = records_of(events)
    heads = [i for i, line in enumerate(records) if b'"kind":"run"' in line]
    assert len(heads) >= 2, "the rollout log rotates: each segment begins with the run record"
    cut = heads[1] - 5
    log = tmp_path / "prober.log"
    log.write_bytes(pod_log(records[cut:], b""))
    out = tmp_path / "out"
    assert main(["analyze", "--pod-logs", str(log), "--out", str(out)]) in (0, 1)
    assert json.loads((out / "summary.json").read_text())["run_id"] == "run-1"


def test_the_echo_names_its_run_again_before_every_summary() -> None:
    """The kubelet rotates container logs and `oc logs` gives the newest file only: the run
    record comes again before each summary, so any stretch holding one names its run."""
    out = io.StringIO()
    header = RunRecord("run-1", "2026-12-01T10:00:00Z", "aws", "0.1.0", {REQUEST: ("s",)})
    echo = RecordEcho(header, out)
    for t in (60.0, 120.0):
        echo.event(Summary(ts="2026-12-01T10:01:00Z", t=t, streams=()))
    kinds = [json.loads(line)["kind"] for line in out.getvalue().splitlines()]
    assert kinds == ["run", "run", "summary", "run", "summary"]


def test_a_compact_pod_log_gives_the_same_measurements(rollout_log, tmp_path: Path) -> None:
    """`event_log_stdout: compact` writes what was measured and no sample: the summary read
    from it holds the same windows, bounds, intervals and counters as the full event log's."""
    events, _ = rollout_log
    records = records_of(events)
    compact = [line for line in records if b'"kind":"sample"' not in line]
    assert len(compact) < len(records) / 10, "the samples are most of a full log"
    log = tmp_path / "pods" / "prober-abc" / "prober.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(pod_log(compact, PREFIXES[2]))
    from_events, from_pods = tmp_path / "events-out", tmp_path / "pods-out"
    assert main(["analyze", str(events), "--out", str(from_events)]) == 1
    assert main(["analyze", "--pod-logs", str(tmp_path / "pods"), "--out", str(from_pods)]) == 1
    expected = json.loads((from_events / "summary.json").read_text())
    found = json.loads((from_pods / "summary.json").read_text())
    assert found["windows"]
    assert any(s["intervals"] for s in found["streams"])
    assert found == expected


def test_the_compact_echo_writes_no_sample(rollout_samples) -> None:
    out = io.StringIO()
    header = RunRecord("run-1", "2026-12-01T10:00:00Z", "aws", "0.1.0", {REQUEST: ("s",)})
    echo = RecordEcho(header, out, samples=False)
    for sample in rollout_samples[:50]:
        echo.keep(sample)
    echo.event(Summary(ts="2026-12-01T10:01:00Z", t=60.0, streams=()))
    kinds = [json.loads(line)["kind"] for line in out.getvalue().splitlines()]
    assert kinds == ["run", "run", "summary"]
