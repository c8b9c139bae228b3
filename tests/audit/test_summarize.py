"""`prober audit summarize` on hand-written, real-shaped audit logs."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import zlib
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from prober.audit.files import discover
from prober.audit.summary import summarize
from prober.core.eventlog import encode
from prober.core.header import apiserver_id
from prober.core.models import REQUEST, ClosedBy, ErrorClass, RunRecord, Window, rfc3339
from tests.audit.cli import run as main
from tests.factories import STREAM, sample
from tests.support.auditlog import (
    KUBELET,
    OPERATOR,
    PROBER,
    T0,
    event,
    graceful,
    line,
    shutdown,
    write,
)

LATE_FIELDS = {
    "apiserver", "user_agent", "source_ip", "user", "verb", "resource", "prober_stream", "count",
    "first", "last",
}  # fmt: skip


def cluster(root: Path) -> Path:
    """Two apiservers: master-0 rotated (one gzip, one plain) with late requests in both
    annotation formats; master-1 with none."""
    node = root / "master-0"
    write(
        node / "audit-2026-05-01T10-00-00.000.log.gz",
        event(1.0),
        event(2.0, annotations=shutdown(elapsed="5s", threshold=7, late=False)),
        event(3.0, annotations=graceful(peer="10.0.0.9")),
        compress=True,
    )
    write(
        node / "audit-2026-05-01T10-05-00.000.log",
        event(4.0, annotations=graceful(peer="10.0.0.9")),
        event(5.0, api_version="audit.k8s.io/v1beta1", user_agent=OPERATOR,
              user="system:serviceaccount:openshift-kube-apiserver-operator:operator",
              verb="list", resource="pods", annotations=shutdown()),
    )  # fmt: skip
    write(node / "audit.log", event(6.0), event(7.0, annotations=graceful(peer="10.0.0.9")))
    write(root / "master-1" / "audit.log", event(1.5), event(2.5))
    return root


def test_late_requests_are_grouped_per_apiserver_and_client(tmp_path: Path):
    families, _ = discover([cluster(tmp_path)])
    body = summarize(families).to_json()
    assert body["v"] == 1
    assert body["events"] == 9
    assert body["bad_lines"] == 0
    assert [f["path"].rsplit("/", 1)[1] for f in body["files"]] == [
        "audit-2026-05-01T10-00-00.000.log.gz",
        "audit-2026-05-01T10-05-00.000.log",
        "audit.log",
        "audit.log",
    ]
    assert body["late"] == [
        {
            "apiserver": "master-0",
            "user_agent": KUBELET,
            "source_ip": "10.0.0.5",
            "user": "system:node:master-1",
            "verb": "get",
            "resource": "namespaces",
            "prober_stream": None,
            "count": 3,
            "first": rfc3339(T0 + 3.0),
            "last": rfc3339(T0 + 7.0),
        },
        {
            "apiserver": "master-0",
            "user_agent": OPERATOR,
            "source_ip": "10.0.0.5",
            "user": "system:serviceaccount:openshift-kube-apiserver-operator:operator",
            "verb": "list",
            "resource": "pods",
            "prober_stream": None,
            "count": 1,
            "first": rfc3339(T0 + 5.0),
            "last": rfc3339(T0 + 5.0),
        },
    ]
    assert body["apiservers"] == [
        {"apiserver": "master-0", "events": 7, "bad_lines": 0, "late": 4},
        {"apiserver": "master-1", "events": 2, "bad_lines": 0, "late": 0},
    ]
    assert body["api_versions"] == {"audit.k8s.io/v1": 8, "audit.k8s.io/v1beta1": 1}


def test_the_command_prints_a_table_and_writes_json_and_junit(tmp_path: Path, capsys):
    out = tmp_path / "results" / "audit"  # created, parents too
    code = main(["audit", "summarize", str(cluster(tmp_path / "logs")), "--out", str(out),
                 "--junit"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "9 events, 0 bad lines, 4 late requests" in printed
    assert re.search(r"\nmaster-0 +3 +2026-\S+ +2026-\S+ +kubelet/v1.29.0", printed)
    assert f"wrote {out / 'audit-summary.json'}" in printed
    assert f"wrote {out / 'junit-audit.xml'}" in printed
    body = json.loads((out / "audit-summary.json").read_text())
    assert {"v", "files", "events", "bad_lines", "late"} <= set(body)
    assert all(set(group) == LATE_FIELDS for group in body["late"])
    suite = ET.parse(out / "junit-audit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    name = "[sig-api-machinery] kube-apiserver/{} should not receive requests late in " \
        "graceful termination"  # fmt: skip
    assert set(cases) == {name.format("master-0"), name.format("master-1")}
    failure = cases[name.format("master-0")]
    assert failure is not None
    assert failure.get("message") == "kube-apiserver/master-0 received 4 requests late"
    assert "3 x get namespaces agent=kubelet/v1.29.0" in (failure.text or "")
    assert cases[name.format("master-1")] is None


def test_check_fails_the_run_when_anything_arrived_late(tmp_path: Path, capsys):
    logs = cluster(tmp_path / "logs")
    assert main(["audit", "summarize", str(logs), "--out", str(tmp_path), "--check"]) == 1
    only_clean = str(logs / "master-1")
    assert main(["audit", "summarize", only_clean, "--out", str(tmp_path), "--check"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/no/such/dir"], "prober audit summarize: /no/such/dir: no such file or directory\n"),
        (["{empty}"], "prober audit summarize: no audit logs found in {empty}\n"),
        (["{log}", "--events", "/no/events.jsonl"],
         "prober audit summarize: /no/events.jsonl: no such event log (nor rotated segments "
         "events.jsonl.NNNNNN.gz)\n"),
    ],
)  # fmt: skip
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    log = write(tmp_path / "master-0" / "audit.log", event())
    fill = {"empty": tmp_path / "empty", "log": log}
    argv = [a.format(**fill) for a in argv]
    assert main(["audit", "summarize", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == message.format(**fill)


def test_bad_input_is_counted_reported_and_never_fatal(tmp_path: Path, capsys):
    node = tmp_path / "master-0"
    good = gzip.compress(b"".join(line(event(t)) for t in range(50)))
    (node).mkdir()
    (node / "audit-2026-05-01T09-00-00.000.log.gz").write_bytes(good[: len(good) - 30])
    write(
        node / "audit.log",
        event(1.0, annotations=graceful()),
        b"this is not json\n",
        b"{" + b'"x":' * 10 + b"\x00" * (10 * 1024 * 1024) + b"\n",  # a 10 MB line
        bytes(b for b in range(256) if b != 10) * 4 + b"\n",  # binary garbage
        b"\n",
        b'{"kind":"Event","apiVersion":"v1","reason":"Pulled"}\n',
        event(2.0, annotations=graceful()),
        b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"cut-off',  # no newline
    )
    code = main(["audit", "summarize", str(node), "--out", str(tmp_path / "o"),
                 "--max-line-bytes", str(1024 * 1024)])  # fmt: skip
    assert code == 0
    body = json.loads((tmp_path / "o" / "audit-summary.json").read_text())
    assert body["bad"] == {
        "blank": 1,
        "not_an_event": 1,
        "not_json": 1,
        "not_utf8": 1,
        "too_long": 1,
        "truncated": 2,  # the cut-off line of the cut-off gzip, and the one without newline
        "unreadable": 1,
    }
    assert body["bad_lines"] == 8
    # the gzip's lines up to where it was cut still count
    cut = (node / "audit-2026-05-01T09-00-00.000.log.gz").read_bytes()
    assert body["events"] == zlib.decompressobj(wbits=31).decompress(cut).count(b"\n") + 2
    assert body["events"] > 40
    assert sum(g["count"] for g in body["late"]) == 2
    audit_log = node / "audit.log"
    assert f"{audit_log}:3: too long" in body["problems"]
    assert f"{audit_log}:8: truncated" in body["problems"]
    assert any(p.startswith(f"{node}/audit-2026-05-01T09-00-00.000.log.gz:") and "unreadable"
               in p for p in body["problems"])  # fmt: skip
    printed = capsys.readouterr().out
    assert "8 bad lines (blank 1, not an event 1, not json 1, not utf8 1, too long 1" in printed


def _event_log(path: Path, late_ids: list[str], failed_id: str, node: str | None) -> None:
    """A prober run that started at T0 - 100 s (wall), saw master-0 shut down at run second
    110 (T0 + 10) until 150 (T0 + 50), in two rotated segments and the live file."""
    start = T0 - 100.0
    run = RunRecord("run-1", rfc3339(start), "aws", "0.1.0", {REQUEST: (STREAM.name,)})

    def at(t: float, audit_id: str, **kw) -> str:
        s = dataclasses.replace(sample(t, **kw), ts=rfc3339(start + t), audit_id=audit_id)
        return encode(s)

    host = apiserver_id("master-0")
    first = [encode(run), at(100.0, "early-0")]
    second = [at(120.0 + i, aid, host=host, late=True, elapsed=10 + i, delay=70)
              for i, aid in enumerate(late_ids)]  # fmt: skip
    second.append(at(125.0, failed_id, error=ErrorClass.CONNECTION_RESET))
    # The server had it, late; the prober's stop cut it before its answer: not a failure.
    second.append(at(126.0, "prober-cut", error=ErrorClass.STOPPED))
    window = Window(host, node, 70.0, 111.0, 110.0, 109.9, 110.1, ClosedBy.RECOVERED, 150.0, ())
    live = [encode(window)]
    for index, records in ((1, first), (2, second)):
        seg = path.with_name(f"{path.name}.{index:06d}.gz")
        seg.write_bytes(gzip.compress("".join(r + "\n" for r in records).encode()))
    path.write_text("".join(r + "\n" for r in live))


@pytest.mark.parametrize("node", ["master-0", None])  # without a node, by APIServerID
def test_prober_requests_and_windows_are_matched(tmp_path: Path, node: str | None):
    late_ids = ["prober-late-1", "prober-late-2"]
    events_path = tmp_path / "events.jsonl"
    _event_log(events_path, late_ids, "prober-reset", node)
    logs = tmp_path / "logs" / "master-0"
    write(
        logs / "audit.log",
        event(5.0),  # before the window
        event(20.0, aid=late_ids[0], user_agent=PROBER, annotations=graceful()),
        event(21.0, aid=late_ids[1], user_agent=PROBER, annotations=graceful()),
        event(22.0, aid="prober-reset", user_agent=PROBER, annotations=graceful()),
        event(23.0, aid="prober-cut", user_agent=PROBER, annotations=graceful()),
        event(30.0, aid="w", stage="ResponseStarted", verb="watch"),
        event(31.0, aid="w", stage="ResponseComplete", verb="watch"),  # same request
        event(40.0, annotations=graceful()),  # late, but not the prober's
        event(60.0),  # after the window
    )
    write(tmp_path / "logs" / "master-1" / "audit.log", event(20.0))
    out = tmp_path / "o"
    argv = ["audit", "summarize", str(tmp_path / "logs"), "--events", str(events_path)]
    assert main([*argv, "--out", str(out)]) == 0
    body = json.loads((out / "audit-summary.json").read_text())
    assert body["prober"]["event_logs"] == [
        str(tmp_path / "events.jsonl.000001.gz"),
        str(tmp_path / "events.jsonl.000002.gz"),
        str(events_path),
    ]
    assert body["prober"]["late_requests"] == 4
    assert body["prober"]["late"] == [
        {
            "apiserver": "master-0",
            "stream": STREAM.name,
            "lb": "internal-lb",
            "protocol": "http2",
            "connection": "new",
            "count": 4,
            "first": rfc3339(T0 + 20.0),
            "last": rfc3339(T0 + 23.0),
            "failed": 1,  # the reset; not the request the stop cut
        }
    ]
    (window,) = body["windows"]
    assert window["apiserver"] == "master-0"
    assert window["audited"] is True
    assert window["start"] == rfc3339(T0 + 10.0)
    assert window["end"] == rfc3339(T0 + 50.0)
    assert window["requests"] == 6  # 4 prober, 1 watch (two stages), 1 other late
    assert window["late"] == 5
    assert window["user_agents"] == {"prober": 4, "kubelet": 2}


def test_windows_from_kubernetes_events(tmp_path: Path):
    def k8s_event(reason: str, t: float, node: str, count: int = 1, last: float | None = None):
        return {
            "kind": "Event",
            "apiVersion": "v1",
            "reason": reason,
            "involvedObject": {"kind": "Pod", "namespace": "openshift-kube-apiserver",
                               "name": f"kube-apiserver-{node}"},
            "source": {"component": "apiserver", "host": node},
            "firstTimestamp": rfc3339(T0 + t)[:19] + "Z",
            "lastTimestamp": rfc3339(T0 + (last if last is not None else t))[:19] + "Z",
            "count": count,
        }  # fmt: skip

    events = {
        "kind": "List",
        "apiVersion": "v1",
        "items": [
            k8s_event("ShutdownInitiated", 10, "master-0"),
            k8s_event("AfterShutdownDelayDuration", 80, "master-0"),
            k8s_event("TerminationGracefulTerminationFinished", 100, "master-0"),
            k8s_event("ShutdownInitiated", 200, "master-1"),  # never finished
            k8s_event("Pulled", 5, "master-0"),
        ],
    }
    (tmp_path / "events.json").write_text(json.dumps(events))
    logs = tmp_path / "logs"
    write(logs / "master-0" / "audit.log", event(5), event(50), event(99, annotations=graceful()),
          event(150))  # fmt: skip
    write(logs / "master-1" / "audit.log", event(150), event(250), event(300))
    out = tmp_path / "o"
    argv = ["audit", "summarize", str(logs), "--shutdown-events", str(tmp_path / "events.json")]
    assert main([*argv, "--out", str(out)]) == 0
    windows = json.loads((out / "audit-summary.json").read_text())["windows"]
    assert [(w["apiserver"], w["source"], w["requests"], w["late"], w["end"]) for w in windows] == [
        ("master-0", "events", 2, 1, rfc3339(T0 + 100)),
        ("master-1", "events", 2, 0, None),
    ]


def test_an_event_log_of_a_newer_schema_is_bad_input(tmp_path: Path, capsys):
    log = write(tmp_path / "master-0" / "audit.log", event())
    events = tmp_path / "events.jsonl"
    events.write_text('{"v": 2, "kind": "run"}\n')
    assert main(["audit", "summarize", str(log), "--events", str(events), "--out",
                 str(tmp_path / "o")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "schema version 2" in err


def test_the_prober_command_line_has_audit(tmp_path: Path, capsys):
    from prober.cli import main as prober_main

    assert prober_main(["audit", "summarize", str(tmp_path / "nothing-here")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_the_probers_own_late_requests_are_named_by_their_user_agent(tmp_path: Path, capsys):
    """cluster-kube-apiserver-operator #2222: the probe's own requests among the late ones.
    Without the event log, the User-Agent alone names them, and the stream that sent them."""
    node = tmp_path / "logs" / "master-0"
    write(
        node / "audit.log",
        event(1.0, annotations=graceful(peer="10.0.0.9")),
        event(2.0, user_agent=PROBER, annotations=graceful(peer="10.0.0.9")),
        event(3.0, user_agent=PROBER, annotations=graceful(peer="10.0.0.9")),
        event(4.0, user_agent="prober/0.1.0", annotations=graceful(peer="10.0.0.9")),
        event(5.0, user_agent="proberx/1.0 other", annotations=graceful(peer="10.0.0.9")),
    )
    out = tmp_path / "audit"
    assert main(["audit", "summarize", str(tmp_path / "logs"), "--out", str(out),
                 "--junit"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "5 late requests (3 of them the prober's own, by User-Agent)" in printed
    assert re.search(rf"\nmaster-0 +2 +\S+ +\S+ +{re.escape(PROBER)} \(ours\) ", printed)
    assert "proberx/1.0 other (ours)" not in printed
    body = json.loads((out / "audit-summary.json").read_text())
    streams = {g["user_agent"]: g["prober_stream"] for g in body["late"]}
    assert streams == {
        PROBER: "kube-api-http2-internal-lb-new-connections",
        "prober/0.1.0": "prober",
        "proberx/1.0 other": None,
        KUBELET: None,
    }
    failure = ET.parse(out / "junit-audit.xml").getroot().find(".//failure")
    assert failure is not None
    assert f"agent={PROBER} (ours)" in (failure.text or "")
