"""Reading the prober's event logs (as the daemon rotates them) and Kubernetes Events."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from prober.audit.evidence import read_prober_logs, read_shutdown_events, segments
from prober.audit.files import InputError
from prober.core.models import REQUEST, ClosedBy, ErrorClass, RunRecord, Window, rfc3339
from prober.daemon.eventlog import EventLogWriter
from tests.factories import STREAM, sample
from tests.support.auditlog import T0


def test_segments_in_number_order_preferring_finished_gzip(tmp_path: Path):
    log = tmp_path / "events.jsonl"
    for name in ("events.jsonl.000002", "events.jsonl.000001.gz", "events.jsonl.000003",
                 "events.jsonl.000003.gz", "events.jsonl.000003.gz.part", "events.jsonl",
                 "events.jsonl.previous-20260101T000000Z", "other.jsonl.000004.gz"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in segments(log)] == [
        "events.jsonl.000001.gz",
        "events.jsonl.000002",
        "events.jsonl.000003.gz",
        "events.jsonl",
    ]
    with pytest.raises(InputError, match="no such event log"):
        segments(tmp_path / "missing.jsonl")


def test_an_event_log_rotated_by_the_daemon_is_read_whole(tmp_path: Path):
    start = T0 - 100.0
    path = tmp_path / "events.jsonl"
    writer = EventLogWriter(
        str(path),
        1500,
        RunRecord("run-7", rfc3339(start), "gcp", "0.1.0", {REQUEST: (STREAM.name,)}),
    )
    writer.open()
    ids = []
    for i in range(12):
        late = i % 3 == 0
        error = ErrorClass.TIMEOUT if i == 4 else None
        s = sample(100.0 + i, host="apiserver-x" if late else None, late=late, error=error)
        s = dataclasses.replace(s, ts=rfc3339(start + 100.0 + i), audit_id=f"id-{i}")
        writer.write(s)
        ids.append((s.audit_id, late or error is not None))
    window = Window("apiserver-x", "master-2", 95.0, 100.0, 99.5, 99.0, 100.0, ClosedBy.TIMEOUT,
                    225.0, ())  # fmt: skip
    writer.write(window)
    written = writer.close()
    assert len(written) > 2  # it really rotated
    evidence = read_prober_logs([path])
    assert evidence.files == [str(p) for p in written]
    assert evidence.samples_seen == 12
    assert sorted(evidence.samples) == sorted(i for i, kept in ids if kept)
    assert evidence.samples["id-4"].error == "timeout"
    assert evidence.samples["id-0"].lb == STREAM.lb.value
    (span,) = evidence.spans
    assert (span.node, span.host) == ("master-2", "apiserver-x")
    assert span.start == pytest.approx(T0 - 0.5)
    assert span.end == pytest.approx(T0 + 125.0)


def test_kubernetes_events_as_json_lines_and_aggregated(tmp_path: Path):
    def k8s(reason: str, first: float, last: float | None = None, count: int = 1) -> str:
        return json.dumps({
            "kind": "Event", "apiVersion": "v1", "reason": reason, "count": count,
            "involvedObject": {"kind": "Pod", "name": "kube-apiserver-master-0"},
            "firstTimestamp": rfc3339(T0 + first), "lastTimestamp": rfc3339(T0 + (last or first)),
        })  # fmt: skip

    path = tmp_path / "events.jsonl"
    # Two shutdowns of the same static pod: Kubernetes folds each reason into one Event.
    path.write_text("\n".join([
        k8s("ShutdownInitiated", 10, 500, count=2),
        k8s("HTTPServerStoppedListening", 90, 580, count=2),
        k8s("TerminationGracefulTerminationFinished", 100, 590, count=2),
    ]) + "\n")  # fmt: skip
    spans = read_shutdown_events(path)
    assert [(s.node, s.start - T0, (s.end or 0) - T0) for s in spans] == [
        ("master-0", pytest.approx(10), pytest.approx(100)),
        ("master-0", pytest.approx(500), pytest.approx(590)),
    ]


def test_a_file_that_is_not_events_is_bad_input(tmp_path: Path):
    path = tmp_path / "events.json"
    path.write_text('{"kind": "List", "items": 3}')
    with pytest.raises(InputError, match="'items' is not a list of Events"):
        read_shutdown_events(path)
    path.write_text("{}\nnot json\n")
    with pytest.raises(InputError, match=r"events.json:2: not a JSON Event"):
        read_shutdown_events(path)
