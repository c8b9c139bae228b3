"""Answer times by run phase in summary.json, report.html and junit.xml (`results.latency`):
a log the daemon's own writer wrote gives, on re-analysis, exactly the figures its pipeline
counted live; an LB slowed in the windows only is slow but up, and no other stream is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from prober.cli import main
from prober.core.latency import Part, RunPhase, figures
from prober.core.models import LB, Connection, Protocol, Sample, StreamId
from prober.report.analyze import analyze_runs
from prober.report.verdicts.identity import Case
from prober.report.verdicts.verdicts import Status
from tests.report.daemonlog import LiveOutput, run_record, write_daemon_log
from tests.report.rollout import NODES, streams

SLOWED = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.REUSED)
DELAY = 1.5  # seconds added to each in-window answer of SLOWED: past 3 x quiet and the floor


def test_reanalysis_gives_the_live_figures_of_every_stream(rollout_log, rollout_samples) -> None:
    path, live = rollout_log
    [analysis], _ = analyze_runs([path])
    section = analysis.summary["latency"]
    final = {c.stream: c for c in live.summaries[-1].streams}
    assert [e["stream"] for e in section["streams"]] == [s.name for s in streams()]
    for entry in section["streams"]:
        counted = figures(final[entry["stream"]].latency)
        for phase in RunPhase:
            f = counted[phase.value]
            assert entry[phase.value] == {"count": f.count, "p50": f.p50, "p99": f.p99}
        assert entry["before_windows"]["count"] > 0
        assert entry["in_windows"]["count"] > 0
        assert not entry["slow_but_up"]
    answered = sum(s.error is None for s in rollout_samples)
    counts = sum(e[p.value]["count"] for e in section["streams"] for p in RunPhase)
    assert counts == answered  # every answer counted in one phase, logged or not


def slowed_in_windows(samples: list[Sample], live: LiveOutput) -> list[Sample]:
    """The samples, with SLOWED's answers in the windows (as the daemon placed them) later."""
    return [
        dataclasses.replace(s, dur=s.dur + DELAY)
        if s.stream == SLOWED.name
        and s.error is None
        and live.phases[(s.stream, s.t)] is RunPhase.IN
        else s
        for s in samples
    ]


def test_an_lb_slow_in_the_windows_only_is_slow_but_up_alone(
    tmp_path: Path, rollout_samples, capsys
) -> None:
    first = write_daemon_log(
        tmp_path / "a.jsonl", run_record(streams()), rollout_samples, nodes=NODES
    )
    path = tmp_path / "events.jsonl"
    slowed = slowed_in_windows(rollout_samples, first)
    write_daemon_log(path, run_record(streams()), slowed, nodes=NODES)
    [analysis], _ = analyze_runs([path])
    flagged = [e["stream"] for e in analysis.summary["latency"]["streams"] if e["slow_but_up"]]
    assert flagged == [SLOWED.name]
    judged = {v.stream: v for v in analysis.verdicts if v.id.case is Case.NOT_SLOW}
    assert judged[SLOWED.name].status is Status.FAILED
    assert "slow but up" in judged[SLOWED.name].message
    others = {v.status for name, v in judged.items() if name != SLOWED.name}
    assert others == {Status.PASSED}
    out = tmp_path / "out"
    main(["analyze", str(path), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "answer times by run phase" in printed
    html = (out / "report.html").read_text()
    assert 'id="latency"' in html
    assert "SLOW" in html
    junit = (out / "junit.xml").read_text()
    assert "should answer in the shutdown windows about as fast as outside them" in junit


def test_connect_and_tls_of_new_connections_reanalyse_to_the_live_figures(
    tmp_path: Path, rollout_samples
) -> None:
    """Each answered request of a new-connection stream opened its connection: its connect
    and TLS times ride in the summary records beside the answer times."""
    timed = [
        dataclasses.replace(s, connect=0.001 + 0.0001 * (i % 7), tls=0.004 + 0.0002 * (i % 5))
        if s.stream_id.connection is Connection.NEW and s.error is None
        else s
        for i, s in enumerate(rollout_samples)
    ]
    path = tmp_path / "events.jsonl"
    live = write_daemon_log(path, run_record(streams()), timed, nodes=NODES)
    [analysis], _ = analyze_runs([path])
    final = {c.stream: c for c in live.summaries[-1].streams}
    for entry in analysis.summary["latency"]["streams"]:
        phase_entry = entry["in_windows"]
        if entry["connection"] == "reused":
            assert "connect" not in phase_entry
            continue
        for part in (Part.CONNECT, Part.TLS):
            f = figures(final[entry["stream"]].latency, part)[RunPhase.IN.value]
            assert phase_entry[part.value] == {"count": f.count, "p50": f.p50, "p99": f.p99}
            assert f.count == phase_entry["count"]  # every answer opened its connection
