"""`prober origin`: the run's results in the files origin leaves in a job's artifacts, each
held to a JSON schema written from origin's Go types (tests/report/origin/*.schema.json),
and to what the summary says, computed here independently of the writer."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import sqlglot
from sqlglot import exp

from prober.cli import main
from prober.core.durations import SECOND, parse_go_duration, parse_go_duration_ns
from prober.core.models import LB, Connection, Protocol, StreamId, parse_rfc3339
from prober.report.ci.origin_autodl import PARTITION_COLUMN, SCHEMA
from prober.report.ci.origin_timeline import disruption_line
from prober.report.schema.origin_types import BACKEND_PREFIX, backend_name, parse_backend_name
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.rollout import NODES, streams
from tests.support.warehouse import WAREHOUSE

FIXTURES = Path(__file__).parent / "origin"
STAMP = "20261130-100000"  # the rollout's start, tests/report/daemonlog.py START
LABELS = ("release=4.21", "upgrade=true", "job_name=periodic-e2e-aws")
BIGQUERY_TO_AUTODL = {"STRING": "string", "INTEGER": "int64", "FLOAT": "float64",
                      "TIMESTAMP": "timestamp", "BOOLEAN": "bool", "JSON": "json"}  # fmt: skip
SHUTDOWN_MESSAGE = re.compile(
    r"graceful shutdown interval(?:: (?P<failures>\d+) failures)?: load balancer took "
    r"new\((?P<new>\S+)\) reused\((?P<reused>\S+)\) to switch to a new host: host=(?P<host>\S+) "
    r"shutdown-delay-duration=(?P<delay>\S+) max-elapsed-reuse=(?P<me_reused>\S+) "
    r"max-elapsed-new=(?P<me_new>\S+) failure=(?P<failure>\d+) "
    r"new-bound=\[(?P<new_lo>\S+), (?P<new_hi>\S+)\] "
    r"reused-bound=\[(?P<reused_lo>\S+), (?P<reused_hi>\S+)\]"
)
# origin's Interval.String(): "Nov 30 10:00:50.150 - 3s    E <locator> <message>"
INTERVAL_LINE = re.compile(r"[A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2}\.\d{3} - (\d+ms|\d+s) +E \S")


@dataclass(frozen=True)
class Run:
    summary: Path
    doc: dict[str, Any]
    out: Path

    def load(self, name: str) -> Any:
        return json.loads((self.out / name).read_text())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, rollout_samples) -> Run:
    base = tmp_path_factory.mktemp("origin")
    log = base / "events.jsonl"
    write_daemon_log(log, run_record(streams()), rollout_samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(base / "analysis")]) == 1  # one LB fails
    summary = base / "analysis" / "summary.json"
    labels = [f"--label={x}" for x in LABELS]
    assert main(["origin", str(summary), "--out", str(base / "out"), *labels]) == 0
    return Run(summary, json.loads(summary.read_text()), base / "out")


def schema(name: str) -> Any:
    found = json.loads((FIXTURES / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(found)
    return found


def test_the_files_are_named_as_ci_finds_them(run: Run, capsys) -> None:
    assert sorted(p.name for p in run.out.iterdir()) == [
        f"backend-disruption_prober_{STAMP}.json",
        f"e2e-timelines_prober_{STAMP}.json",
        f"prober-interval-{STAMP}-autodl.json",
        f"prober-restart-{STAMP}-autodl.json",
        f"prober-shutdown-{STAMP}-autodl.json",
        f"prober-stream-{STAMP}-autodl.json",
    ]
    # ci-tools' pattern for backend disruption, Sippy's for intervals, ci-data-loader's suffix
    names = [p.name for p in run.out.iterdir()]
    assert sum(bool(re.fullmatch(r"backend-disruption[^/]*", n)) for n in names) == 1
    assert sum(bool(re.fullmatch(r".*e2e-timelines.*\.json", n)) for n in names) == 1
    assert sum(n.endswith("autodl.json") for n in names) == 4


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        (f"e2e-timelines_prober_{STAMP}.json", "intervals"),
        (f"backend-disruption_prober_{STAMP}.json", "backend-disruption"),
        (f"prober-stream-{STAMP}-autodl.json", "autodl"),
        (f"prober-shutdown-{STAMP}-autodl.json", "autodl"),
        (f"prober-interval-{STAMP}-autodl.json", "autodl"),
        (f"prober-restart-{STAMP}-autodl.json", "autodl"),
    ],
)
def test_each_file_fits_the_schema_of_origins_go_types(run: Run, name: str, shape: str) -> None:
    jsonschema.Draft202012Validator(schema(shape)).validate(run.load(name))


def test_each_disruption_interval_is_one_of_origins(run: Run) -> None:
    items = run.load(f"e2e-timelines_prober_{STAMP}.json")["items"]
    found = [i for i in items if i["source"] == "Disruption"]
    expected = [(s, i) for s in run.doc["streams"] for i in s["intervals"]]
    assert len(found) == len(expected) == 6  # two failing streams, three rollouts
    started = parse_rfc3339(run.doc["started"])
    by_start = {(i["locator"]["keys"]["backend-disruption-name"], i["message"]["annotations"]
                 ["start"]): i for i in found}  # fmt: skip
    for stream, interval in expected:
        start, end = started + interval["start_t"], started + interval["end_t"]
        item = by_start[(BACKEND_PREFIX + stream["stream"], _micro(start))]
        sid = StreamId.parse(stream["stream"])
        assert item["locator"] == {"type": "Disruption", "keys": {
            "backend-disruption-name": BACKEND_PREFIX + stream["stream"],
            "connection": sid.connection.value,
            "disruption": f"{BACKEND_PREFIX}{sid.target}-{sid.protocol}-{sid.lb}",
            "load-balancer": sid.lb.value, "protocol": sid.protocol.value, "target": sid.target,
        }}  # fmt: skip
        assert (item["level"], item["display"]) == ("Error", True)
        assert item["message"]["reason"] == item["message"]["annotations"]["reason"]
        assert item["message"]["reason"] == "DisruptionBegan"
        # Whole seconds that cover the measured interval, never an empty one.
        assert _epoch(item["from"]) == math.floor(start)
        assert _epoch(item["to"]) == max(math.ceil(end), math.floor(start) + 1)
        notes = item["message"]["annotations"]
        assert notes["end"] == _micro(end)
        for name in ("start_lo", "start_hi", "end_lo", "end_hi"):
            assert notes[name.replace("_", "-")] == _micro(started + interval[name])
        assert parse_go_duration(notes["duration"]) == pytest.approx(end - start, abs=1e-9)
        assert notes["failed-requests"] == str(interval["samples"])
        assert (
            f"over {sid.connection} connections: {interval['error']}"
            in (item["message"]["humanMessage"])
        )


def test_each_shutdown_window_is_an_interval_per_lb_in_origins_words(run: Run) -> None:
    items = run.load(f"e2e-timelines_prober_{STAMP}.json")["items"]
    found = [i for i in items if i["source"] == "APIServerShutdown"]
    started = parse_rfc3339(run.doc["started"])
    lbs = {ws["lb"] for w in run.doc["windows"] for ws in w["streams"]}
    assert len(found) == len(run.doc["windows"]) * len(lbs) == 6
    for window in run.doc["windows"]:
        for lb in lbs:
            mine = [ws for ws in window["streams"] if ws["lb"] == lb]
            t0 = started + window["t0"]
            [item] = [i for i in found if i["locator"]["keys"]["load-balancer"] == lb
                      and i["message"]["annotations"]["host"] == window["host"]]  # fmt: skip
            assert item["locator"] == {
                "type": "APIServer",
                "keys": {"load-balancer": lb, "server": "kube-apiserver"},
            }
            assert _epoch(item["from"]) == math.floor(t0)
            assert _epoch(item["to"]) == math.ceil(t0 + window["delay"] + 15)
            failures = sum(ws["failures"] for ws in mine)
            assert item["level"] == ("Warning" if failures else "Info")
            assert item["message"]["reason"] == "GracefulShutdownInterval"
            _holds_origins_words(item["message"], window, mine, failures)
            _annotations_hold_each_mode_exactly(item["message"]["annotations"], mine)


def _holds_origins_words(message: Any, window: Any, mine: list[Any], failures: int) -> None:
    words = SHUTDOWN_MESSAGE.fullmatch(message["humanMessage"])
    assert words, message["humanMessage"]
    assert int(words["failure"]) == failures == int(words["failures"] or 0)
    assert words["host"] == window["host"]
    assert parse_go_duration(words["delay"]) == window["delay"]
    for mode in ("new", "reused"):
        of_mode = [ws for ws in mine if ws["connection"] == mode]
        worst = max(of_mode, key=lambda ws: ws["reaction"])  # every stream here was late
        # origin rounds to the second: time.Duration.Round(time.Second)
        assert parse_go_duration(words[mode]) == round(worst["reaction"])
        elapsed = max(ws["max_elapsed"] for ws in of_mode)
        key = "me_reused" if mode == "reused" else "me_new"
        assert parse_go_duration(words[key]) == elapsed
        # its bound in whole seconds too, rounded outward: it holds the reaction as printed
        lo, hi = (parse_go_duration(words[f"{mode}_{side}"]) for side in ("lo", "hi"))
        assert (lo, hi) == (math.floor(worst["reaction_lo"]), math.ceil(worst["reaction_hi"]))
        assert lo <= parse_go_duration(words[mode]) <= hi


def _annotations_hold_each_mode_exactly(notes: dict[str, str], mine: list[Any]) -> None:
    for protocol in Protocol:
        for connection in Connection:
            [ws] = [w for w in mine if (w["protocol"], w["connection"]) == (protocol, connection)]
            mode = f"{protocol}-{connection}"
            assert notes[f"{mode}-stream"] == ws["stream"]
            for name in ("reaction", "reaction_lo", "reaction_hi", "max_elapsed"):
                assert float(notes[f"{mode}-{name.replace('_', '-')}"]) == round(ws[name], 6)
            assert notes[f"{mode}-bound-by"] == ws["bound_by"]
            assert (notes[f"{mode}-late"], notes[f"{mode}-failures"]) == (
                str(ws["late"]), str(ws["failures"]))  # fmt: skip


def test_backend_disruption_has_every_stream_and_parses_as_ci_tools_reads_it(run: Run) -> None:
    found = run.load(f"backend-disruption_prober_{STAMP}.json")["BackendDisruptions"]
    assert len(found) == len(run.doc["streams"]) == 8
    for stream in run.doc["streams"]:
        sid = StreamId.parse(stream["stream"])
        entry = found[BACKEND_PREFIX + stream["stream"]]
        assert entry["Name"] == entry["BackendName"] == BACKEND_PREFIX + stream["stream"]
        assert entry["ConnectionType"] == {"new": "New", "reused": "Reused"}[sid.connection]
        assert (entry["LoadBalancerType"], entry["Protocol"], entry["TargetAPI"]) == (
            sid.lb.value, sid.protocol.value, sid.target)  # fmt: skip
        # metav1.Duration parses with time.ParseDuration; ci-tools rounds up to a second.
        ns = parse_go_duration_ns(entry["DisruptedDuration"])
        assert ns == round(stream["disruption_seconds"] * SECOND)
        assert math.ceil(ns / SECOND) == math.ceil(round(stream["disruption_seconds"], 9))
        lines = entry["DisruptionMessages"]
        assert len(lines) == len(stream["intervals"])
        assert all(INTERVAL_LINE.match(line) for line in lines), lines
        assert all(f"backend-disruption-name/{entry['Name']} " in line for line in lines)
    assert {e["DisruptedDuration"] for e in found.values()} == {"0s", "9s"}


def test_an_interval_line_counts_as_go_does() -> None:
    row = {"row_type": "interval", "started": "2026-11-30T10:00:00.000000Z", "stream":
           "kube-api-http2-localhost-new-connections", "start_t": 61.5, "end_t": 61.79,
           "seconds": 0.29, "start_lo": None, "start_hi": 61.52, "end_lo": 61.7, "end_hi": None,
           "error": "timeout", "detail": "read timed out", "interval_samples": 3}  # fmt: skip
    line = disruption_line(row)
    assert line.startswith("Nov 30 10:01:01.500 - 290ms E backend-disruption-name/prober-kube")
    assert line.endswith("over new connections: timeout: read timed out (290ms, 3 failed requests)")
    assert " start-lo/" not in line  # unbounded: left out
    assert " end-lo/2026-11-30T10:01:01.700000Z " in line


def test_no_backend_name_is_one_of_origins() -> None:
    origins = {
        line.strip()
        for line in (FIXTURES / "backend_names.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert "kube-api-http2-internal-lb-new-connections" in origins  # a stream name as it is
    assert not any(name.startswith(BACKEND_PREFIX) for name in origins)
    ours = {
        backend_name(StreamId(target, protocol, lb, connection).name)
        for target in ("kube-api", "openshift-api", "kube-apiserver", "prober")
        for protocol in Protocol
        for lb in LB
        for connection in Connection
    }
    assert not ours & origins
    for name in ours:  # and each parses back to its stream
        stream = parse_backend_name(name)
        assert stream is not None
        assert backend_name(stream.name) == name
    assert all(parse_backend_name(name) is None for name in origins)


def test_autodl_rows_are_the_exports_rows_typed_as_declared(run: Run, tmp_path: Path) -> None:
    exported = tmp_path / "rows.jsonl"
    args = ["export", str(run.summary), "-o", str(exported), *(f"--label={x}" for x in LABELS)]
    assert main(args) == 0
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    for row_type in ("stream", "shutdown", "interval", "restart"):
        data = run.load(f"prober-{row_type}-{STAMP}-autodl.json")
        assert data["schema"] == dict(SCHEMA)
        assert data["schema"][data["partition_column"]] == "timestamp"
        typed = [{k: _parse(data["schema"][k], v) for k, v in r.items()} for r in data["rows"]]
        expected = [{k: v for k, v in r.items() if v is not None}
                    for r in rows if r["row_type"] == row_type]  # fmt: skip
        assert typed == expected
        assert all(PARTITION_COLUMN in r for r in data["rows"])
        # Seconds to the microsecond: no arithmetic noise (2.6982039999999996) in a value.
        noisy = [v for r in data["rows"] for v in r.values() if re.fullmatch(r"-?\d+\.\d{7,}", v)]
        assert noisy == []


def _parse(kind: str, text: str) -> Any:
    """A value as ci-data-loader's column type reads it; raises on any that it could not."""
    if kind == "int64":
        return int(text)
    if kind == "float64":
        return float(text)
    if kind == "bool":
        return {"true": True, "false": False}[text]
    if kind == "json":
        return json.loads(text)
    if kind == "timestamp":
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        assert moment.tzinfo is not None
        assert text.endswith("Z")
        return text
    assert kind == "string"
    return text


def test_the_autodl_schema_is_the_warehouses() -> None:
    fields = json.loads((WAREHOUSE / "rows.schema.json").read_text())
    assert list(SCHEMA.items()) == [(f["name"], BIGQUERY_TO_AUTODL[f["type"]]) for f in fields]
    # The query runs on the loader's table as on the warehouse's: every column it reads there.
    query = sqlglot.parse_one((WAREHOUSE / "thresholds.sql").read_text(), read="bigquery")
    read: set[str] = set()
    for table in query.find_all(exp.Table):
        if table.name == "run_rows":
            select = table.find_ancestor(exp.Select)
            assert select is not None
            read |= {column.name for column in select.find_all(exp.Column)}
    assert read >= {"row_type", "started", "reaction", "disruption_seconds", "windows"}
    assert read <= set(SCHEMA), read - set(SCHEMA)


def _epoch(text: str) -> int:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text), text
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def _micro(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_watch_blindness_and_doomed_re_watches_are_intervals_of_their_own(
    run: Run, tmp_path: Path
) -> None:
    stream = "kube-api-http2-external-lb-watch"
    doc = {**run.doc, "watches": {"blind_deadline": 3.0, "heartbeat": {"writes": 9, "failed": 0},
           "streams": [{"stream": stream, "lb": "external-lb", "protocol": "http2",
                        "blind": [[10.25, 40.75]], "doomed_at": [
                            {"t": 12.5, "server": "master-1", "elapsed": 1.5}]}]}}  # fmt: skip
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(doc))
    assert main(["origin", str(summary), "--out", str(tmp_path / "out")]) == 0
    document = json.loads((tmp_path / "out" / f"e2e-timelines_prober_{STAMP}.json").read_text())
    jsonschema.Draft202012Validator(schema("intervals")).validate(document)
    name = BACKEND_PREFIX + stream
    mine = [
        i for i in document["items"] if i["locator"]["keys"].get("backend-disruption-name") == name
    ]
    started = parse_rfc3339(run.doc["started"])
    blind, doomed = sorted(mine, key=lambda i: i["level"])  # Error before Warning
    assert blind["level"] == "Error"
    assert blind["message"]["annotations"]["watch"] == "blind"
    assert blind["message"]["annotations"]["start"] == _micro(started + 10.25)
    assert parse_go_duration(blind["message"]["annotations"]["duration"]) == pytest.approx(30.5)
    assert (_epoch(blind["from"]), _epoch(blind["to"])) == (
        math.floor(started + 10.25),
        math.ceil(started + 40.75),
    )
    assert doomed["level"] == "Warning"
    assert doomed["message"]["annotations"]["server"] == "master-1"
    assert _epoch(doomed["to"]) - _epoch(doomed["from"]) == 1
    # The request streams' intervals are all still there, and the backend file has no watch.
    assert (
        len(document["items"]) == len(run.load(f"e2e-timelines_prober_{STAMP}.json")["items"]) + 2
    )
    backends = json.loads(
        (tmp_path / "out" / f"backend-disruption_prober_{STAMP}.json").read_text()
    )
    assert BACKEND_PREFIX + stream not in backends["BackendDisruptions"]
