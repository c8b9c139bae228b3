"""Every pattern rule shown by an event log the daemon's own writer wrote (`daemonlog`), analyzed
as `prober analyze` does, each interval labelled right (`report.results.patterns`).

Each log is a quiet run of six streams (three LBs x two protocols, new connections), a request
every 0.5 s per stream, with one situation planted in it; the standard rollout (`rollout_log`)
shows the shutdown window's rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from prober.core import kinds
from prober.core.models import LB, REQUEST, Connection, ErrorClass, LogRecord, Protocol, StreamId
from prober.core.watch import Heartbeat
from prober.report.analyze import analyze_runs
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.verdicts import Status
from tests.factories import sample
from tests.report.daemonlog import START, LiveOutput, write_daemon_log
from tests.report.history import history_thresholds

STREAMS = [
    StreamId("kube-api", protocol, lb, Connection.NEW)
    for lb in (LB.EXTERNAL, LB.INTERNAL, LB.LOCALHOST)
    for protocol in (Protocol.HTTP1, Protocol.HTTP2)
]
END = 60.0
Failing = Callable[[StreamId, float], ErrorClass | None]


def write(path: Path, failing: Failing, *, node: str | None = None, run_id: str = "run-1",
          others: Iterable[LogRecord] = ()) -> LiveOutput:  # fmt: skip
    """A quiet run whose requests fail where `failing` says (a timeout takes 0.4 s)."""
    samples = []
    for n in range(int(END / 0.5)):
        for i, stream in enumerate(STREAMS):
            t = n * 0.5 + i * 0.01
            error = failing(stream, t)
            dur = 0.4 if error is ErrorClass.TIMEOUT else 0.01
            samples.append(sample(t, stream=stream, error=error, dur=dur))
    samples.sort(key=lambda s: s.end)
    record = kinds.run_record(
        run_id=run_id, ts=START, platform="aws", version="0.1.0", node=node,
        streams={REQUEST: [s.name for s in STREAMS]},
    )  # fmt: skip
    return write_daemon_log(path, record, samples, end_t=END, others=others)


def labels(*paths: Path) -> list[dict[str, list[tuple[str, str]]]]:
    """Per run, per stream with intervals, each interval's (pattern, confidence)."""
    analyses, _ = analyze_runs(list(paths))
    return [_labels(a.summary) for a in analyses]


def _labels(summary: SummaryDocument) -> dict[str, list[tuple[str, str]]]:
    return {
        s["stream"]: [(i["pattern"], i["pattern_confidence"]) for i in s["intervals"]]
        for s in summary["streams"]
        if s["intervals"]
    }


def between(lo: float, hi: float, error: ErrorClass, *lbs: LB) -> Failing:
    return lambda s, t: error if lo <= t < hi and s.lb in lbs else None


def test_a_rollout_points_at_the_lbs_readiness_and_at_localhosts_own_server(
    rollout_log: tuple[Path, LiveOutput],
) -> None:
    """Requests the LB sent to a stopped server are its readiness; localhost has no LB, its
    one backend stopped."""
    [run] = labels(rollout_log[0])
    assert run
    for stream, found in run.items():
        expected = "no-backend" if "-localhost-" in stream else "lb-readiness"
        assert {pattern for pattern, _ in found} == {expected}, stream


def test_one_lb_failing_alone(tmp_path: Path) -> None:
    write(tmp_path / "e.jsonl", between(40.0, 43.0, ErrorClass.CONNECT_REFUSED, LB.INTERNAL))
    [run] = labels(tmp_path / "e.jsonl")
    assert set(run) == {s.name for s in STREAMS if s.lb is LB.INTERNAL}
    assert all(found == [("one-lb", "high")] for found in run.values()), run


def test_consecutive_failures_on_several_lbs_mean_no_backend(tmp_path: Path) -> None:
    failing = between(40.0, 43.0, ErrorClass.CONNECT_REFUSED, LB.INTERNAL, LB.EXTERNAL)
    write(tmp_path / "e.jsonl", failing)
    [run] = labels(tmp_path / "e.jsonl")
    assert len(run) == 4
    assert all(found == [("no-backend", "medium")] for found in run.values()), run


def test_scattered_failures_on_several_lbs_mean_one_bad_backend(tmp_path: Path) -> None:
    """Every third request to both LBs lands on a backend that answers 503."""

    def failing(s: StreamId, t: float) -> ErrorClass | None:
        bad = s.lb is not LB.LOCALHOST and 30.0 <= t < 50.0 and round(t / 0.5) % 3 == 0
        return ErrorClass.HTTP_5XX if bad else None

    write(tmp_path / "e.jsonl", failing)
    [run] = labels(tmp_path / "e.jsonl")
    assert len(run) == 4
    for found in run.values():
        assert {pattern for pattern, _ in found} == {"one-backend"}, found


def heartbeat(stalled: tuple[float, float]) -> list[LogRecord]:
    """A write a second, acknowledged at once outside `stalled`, failed inside it."""
    beats: list[LogRecord] = []
    for n in range(int(END)):
        t = float(n)
        inside = stalled[0] <= t < stalled[1]
        ack, revision = (None, None) if inside else (t + 0.01, n)
        beats.append(Heartbeat(t, ack, revision, "TimeoutError" if inside else "", 0.5))
    return beats


def test_every_lb_at_once_with_the_heartbeat_stalled_is_the_control_plane(tmp_path: Path) -> None:
    failing = between(40.0, 42.0, ErrorClass.TIMEOUT, LB.INTERNAL, LB.EXTERNAL, LB.LOCALHOST)
    write(tmp_path / "e.jsonl", failing, others=heartbeat((39.0, 44.0)))
    [run] = labels(tmp_path / "e.jsonl")
    assert len(run) == len(STREAMS)
    assert all(found == [("control-plane", "medium")] for found in run.values()), run


def test_an_etcd_pause_is_told_by_the_heartbeat_not_by_the_cached_reads(tmp_path: Path) -> None:
    """Reads at resourceVersion=0 come from the watch cache: one request timed out while the
    heartbeat's writes went unacknowledged for 8 s; the same timeout without the stall has
    nothing to point at."""
    one = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.NEW)

    def failing(s: StreamId, t: float) -> ErrorClass | None:
        return ErrorClass.TIMEOUT if s == one and 42.0 <= t < 42.5 else None

    write(tmp_path / "paused.jsonl", failing, others=heartbeat((40.0, 48.0)))
    write(tmp_path / "quiet.jsonl", failing, run_id="run-2", others=heartbeat((0.0, 0.0)))
    [paused], [quiet] = labels(tmp_path / "paused.jsonl"), labels(tmp_path / "quiet.jsonl")
    assert paused == {one.name: [("control-plane", "low")]}
    assert quiet == {one.name: [("one-lb", "high")]}


def test_one_nodes_daemon_alone(tmp_path: Path) -> None:
    """Two daemons' logs: m0's saw internal-lb fail, m1's, covering the same time, did not."""
    write(tmp_path / "m0.jsonl", between(40.0, 43.0, ErrorClass.CONNECT_REFUSED, LB.INTERNAL),
          node="m0", run_id="m0-run")  # fmt: skip
    write(tmp_path / "m1.jsonl", lambda s, t: None, node="m1", run_id="m1-run")
    m0, m1 = labels(tmp_path / "m0.jsonl", tmp_path / "m1.jsonl")
    assert len(m0) == 2
    assert all(found == [("one-node", "medium")] for found in m0.values()), m0
    assert m1 == {}
    # Both daemons saw it: it is the LB's, not a node's.
    write(tmp_path / "m1.jsonl", between(40.0, 43.0, ErrorClass.CONNECT_REFUSED, LB.INTERNAL),
          node="m1", run_id="m1-run")  # fmt: skip
    m0, m1 = labels(tmp_path / "m0.jsonl", tmp_path / "m1.jsonl")
    assert all(found == [("one-lb", "high")] for found in [*m0.values(), *m1.values()])


def test_a_lone_failure_with_another_lb_failing_is_unknown(tmp_path: Path) -> None:
    def failing(s: StreamId, t: float) -> ErrorClass | None:
        lone = s.protocol is Protocol.HTTP1 and s.lb in (LB.EXTERNAL, LB.INTERNAL)
        return ErrorClass.CONNECT_REFUSED if lone and 40.0 <= t < 40.5 else None

    write(tmp_path / "e.jsonl", failing)
    [run] = labels(tmp_path / "e.jsonl")
    assert len(run) == 2
    assert all(found == [("unknown", "low")] for found in run.values()), run


def test_the_junit_failure_names_each_intervals_pattern(tmp_path: Path) -> None:
    """Availability fails on internal-lb (its history allows none): each interval's line in the
    failure text says what it points at."""
    write(tmp_path / "e.jsonl", between(40.0, 43.0, ErrorClass.CONNECT_REFUSED, LB.INTERNAL))
    [analysis], _ = analyze_runs([tmp_path / "e.jsonl"], thresholds=history_thresholds(tmp_path))
    failed = [v for v in analysis.verdicts if v.status is Status.FAILED]
    assert {v.stream for v in failed} == {s.name for s in STREAMS if s.lb is LB.INTERNAL}
    for verdict in failed:
        [line] = verdict.details[1:]
        assert line.endswith("; pattern one-lb (high confidence): internal-lb alone: "
                             "external-lb, localhost answered"), line  # fmt: skip
