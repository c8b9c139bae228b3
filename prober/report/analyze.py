"""`prober analyze`: event logs -> summary.json, junit.xml and report.html per run.

A pipeline of four stages, each entered once, every run through one before the next
(`stages.STAGES` names each stage's modules; `tests/report/test_pipeline_trace.py` holds
a real run to it):
1. replay: the logs read (`runs`) and each run replayed through the core trackers (`replay`);
2. results: its summary (`summary`, with `samenode`'s and `restarts`' sections) and its watch
   streams (`watches`);
3. verdicts: the history loaded (`thresholds`), then every test judged (`judging`);
4. documents: summary.json, junit.xml and report.html written (`write_outputs`), the run
   told in words (`run_text`).
One run writes into OUT; several runs (logs of several daemons, or a daemon restarted onto
the same file) write into OUT/<run id>/ each.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from prober import __version__
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.budgets import PLATFORMS, Platform, with_settings
from prober.core.models import LBSettings
from prober.core.numbers import micro_floats
from prober.core.watch import WATCH, Heartbeat
from prober.report.documents.html_run import RunReport, render_run_report
from prober.report.documents.junit import write_junit
from prober.report.documents.run_text import describe
from prober.report.history.thresholds import Thresholds
from prober.report.replay.replay import Replay, replay
from prober.report.replay.runs import ReadStats, RunLog, load_runs
from prober.report.results.own_late import own_late_section
from prober.report.results.pattern_labels import label_summary, peers_of
from prober.report.results.rebalancing import rebalancing_section
from prober.report.results.restarts import restarts_section
from prober.report.results.samenode import add_same_node
from prober.report.results.summary import build_summary
from prober.report.results.watches import WatchStreams, watch_streams
from prober.report.schema.jsonio import write_json
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.analysis import RunAnalysis
from prober.report.verdicts.judging import judge_run, load_history
from prober.report.verdicts.watch_verdicts import WatchAllowed


def analyze_runs(
    paths: Sequence[Path],
    *,
    platform: str | None = None,
    thresholds: Thresholds | Path | None = None,
    skip_bad_lines: bool = False,
    pod_logs: bool = False,
    watch_allowed: WatchAllowed | None = None,
    lb_settings: Platform | None = None,
) -> tuple[list[RunAnalysis], ReadStats]:
    """Every run of the logs, replayed, summarised and judged: each stage for every run
    before the next. `thresholds`: the history, or its thresholds.json, read at the verdicts
    stage; `lb_settings`: what the LBs promise (`core.budgets`), the platform's row by
    default."""
    logs, stats = load_runs(paths, skip_bad_lines=skip_bad_lines, pod_logs=pod_logs)
    replays = [replay(log) for log in logs]
    results = [
        _results(log, result, platform or log.run.platform, lb_settings)
        for log, result in zip(logs, replays, strict=True)
    ]
    label_patterns(logs, replays, [summary for summary, *_ in results])
    history = load_history(thresholds)
    analyses = []
    for log, result, (summary, warnings, promised, watches) in zip(
        logs, replays, results, strict=True
    ):
        judged = judge_run(summary, promised, history, watch_allowed or WatchAllowed())
        warned = [*warnings, *judged.warnings]
        analyses.append(
            RunAnalysis(log, result, summary, judged.verdicts, warned, watches, judged.edges)
        )
    return analyses, stats


def _results(
    log: RunLog, result: Replay, platform: str, lb_settings: Platform | None
) -> tuple[SummaryDocument, list[str], Platform | None, WatchStreams]:
    """The results stage of one run: its summary, warnings about what it could not count,
    what its LBs promise, and its watch streams."""
    summary, warnings = build_summary(log, result, platform)
    add_same_node(summary, log, result)
    promised = lb_settings or _promised(platform, log.run.lb_settings)
    restarts = restarts_section(result.instances, promised)
    if restarts is not None:
        summary["restarts"] = restarts
    rebalancing = rebalancing_section(
        log.summaries, result.instances, result.windows, log.apiservers
    )
    if rebalancing is not None:
        summary["rebalancing"] = micro_floats(rebalancing)
    settings = log.run.lb_settings
    exact = settings.shutdown_delay if settings is not None else None
    own = own_late_section(log.samples, result.windows, exact)
    if own is not None:
        summary["own_late"] = micro_floats(own)
    watches = watch_streams(result.others.get(WATCH, ()), result.end_t)
    return summary, [*result.warnings, *warnings], promised, watches


def label_patterns(
    logs: Sequence[RunLog], replays: Sequence[Replay], summaries: Sequence[SummaryDocument]
) -> None:
    """Every run's intervals labelled with a pattern (`results.patterns`), each run against
    the other daemons' runs when several daemons' logs were read together."""
    peers = peers_of(summaries, [log.run.node for log in logs])
    for result, summary, theirs in zip(replays, summaries, peers, strict=True):
        beats = [r for r in result.others.get(WATCH, ()) if isinstance(r, Heartbeat)]
        label_summary(summary, beats, result.end_t, theirs)


def _promised(platform: str, settings: LBSettings | None) -> Platform | None:
    """What the LBs of a run promise: its platform's row, with the settings its daemon was
    configured with laid over it."""
    row = PLATFORMS.get(platform)
    return None if row is None else with_settings(row, settings)


def write_outputs(analysis: RunAnalysis, stats: ReadStats, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    run = analysis.log.run
    summary_path, junit_path, html_path = (
        out / "summary.json",
        out / "junit.xml",
        out / "report.html",
    )
    write_json(summary_path, analysis.summary)
    properties = {
        "run_id": run.run_id,
        "platform": analysis.summary["platform"],
        "prober_version": run.version,
        "analyzer_version": __version__,
    }
    ended = analysis.summary.get("ended")
    if ended is not None and ended["abruptly"]:
        properties["ended_abruptly_at"] = f"{ended['t']:.6f}"
    write_junit(junit_path, analysis.verdicts, properties)
    report = RunReport(
        analysis.log,
        analysis.replay,
        analysis.summary,
        analysis.verdicts,
        analysis.warnings,
        stats,
        analysis.watches,
    )
    html_path.write_text(render_run_report(report), encoding="utf-8")
    return [summary_path, junit_path, html_path]


def run_dir(out: Path, run_id: str, several: bool) -> Path:
    if not several:
        return out
    return out / (re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._") or "run")


def analyze_command(
    paths: Sequence[Path],
    *,
    platform: str | None,
    thresholds_path: Path | None,
    out: Path,
    skip_bad_lines: bool,
    pod_logs: bool = False,
    watch_reestablish_within: float | None = None,
    watch_blind_within: float | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    analyses, stats = analyze_runs(
        paths,
        platform=platform,
        thresholds=thresholds_path,
        skip_bad_lines=skip_bad_lines,
        pod_logs=pod_logs,
        watch_allowed=WatchAllowed(watch_reestablish_within, watch_blind_within),
    )
    written = []
    for analysis in analyses:
        target = run_dir(out, analysis.log.run.run_id, len(analyses) > 1)
        with writing(f"into {target}"):
            written += write_outputs(analysis, stats, target)
    for note in stats.notes:
        print(f"note: {note}", file=stderr)
    if stats.skipped:
        print(
            f"note: skipped {stats.skipped} of {stats.lines} lines in {len(stats.files)} files "
            f"({stats.unknown_kinds} of unknown kinds, {stats.truncated} truncated)",
            file=stderr,
        )
    for analysis in analyses:
        for warning in analysis.warnings:
            print(f"warning: {warning}", file=stderr)
        print("\n".join(describe(analysis)), file=stdout)
        print(file=stdout)
    for path in written:
        print(f"wrote {path}", file=stdout)
    return ExitCode.FAILED if any(a.failed for a in analyses) else ExitCode.OK
