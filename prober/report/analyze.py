"""`prober analyze`: event logs -> summary.json, junit.xml and report.html per run.

Each run is replayed through the core trackers (`replay`), summarised (`summary`), judged
against the history (`verdicts`), and written. One run writes into OUT; several runs (logs of
several daemons, or a daemon restarted onto the same file) write into OUT/<run id>/ each.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from prober import __version__
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.budgets import PLATFORMS, Platform, with_settings
from prober.core.models import LBSettings
from prober.report.age_verdicts import explain_ages, judge_ages
from prober.report.budget_verdicts import explain, judge_budgets
from prober.report.connection_ages import age_lines
from prober.report.documents import SummaryDocument, VerdictEntry
from prober.report.early_verdicts import edges_line, explain_restarts, judge_early
from prober.report.html_run import RunReport, render_run_report
from prober.report.jsonio import write_json
from prober.report.junit import write_junit
from prober.report.replay import Replay, replay
from prober.report.restarts import restart_lines, restarts_section, shutting_label
from prober.report.run_verdict import abrupt_text, whole_run
from prober.report.runs import ReadStats, RunLog, load_runs
from prober.report.samenode import add_same_node, same_node_lines
from prober.report.summary import build_summary
from prober.report.tables import bounded, seconds, table
from prober.report.thresholds import Thresholds, load_thresholds
from prober.report.verdicts import Status, Verdict, judge
from prober.report.watch_verdicts import (
    BLIND_WITHIN,
    REESTABLISH_WITHIN,
    WatchAllowed,
    judge_watches,
)


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    log: RunLog
    replay: Replay
    summary: SummaryDocument
    verdicts: list[Verdict]
    warnings: list[str]

    @property
    def failed(self) -> bool:
        return any(v.status is Status.FAILED for v in self.verdicts)


def analyze_runs(
    paths: Sequence[Path],
    *,
    platform: str | None = None,
    thresholds: Thresholds | None = None,
    skip_bad_lines: bool = False,
    pod_logs: bool = False,
    watch_allowed: WatchAllowed | None = None,
    lb_settings: Platform | None = None,
) -> tuple[list[RunAnalysis], ReadStats]:
    """Every run of the logs, replayed, summarised and judged. `lb_settings`: what the LBs
    promise (`core.budgets`); the platform's row of the table by default."""
    logs, stats = load_runs(paths, skip_bad_lines=skip_bad_lines, pod_logs=pod_logs)
    analyses = []
    for log in logs:
        result = replay(log)
        run_platform = platform or log.run.platform
        summary, warnings = build_summary(log, result, run_platform)
        add_same_node(summary, log, result)
        warnings = [*result.warnings, *warnings]
        if thresholds is not None and not thresholds.covers(run_platform):
            warnings.append(
                f"{thresholds.source}: no history for platform {run_platform!r} (it has "
                f"{', '.join(thresholds.platforms) or 'nothing'}): verdicts that need it are "
                "skipped"
            )
        verdicts = judge(summary, thresholds) + judge_watches(
            summary.get("watches"), watch_allowed or WatchAllowed()
        )
        promised = lb_settings or _promised(run_platform, log.run.lb_settings)
        verdicts += judge_budgets(summary, promised)
        verdicts += judge_ages(summary, promised)
        restarts = restarts_section(result.instances, promised)
        if restarts is not None:
            summary["restarts"] = restarts
        verdicts += judge_early(summary)
        verdicts += whole_run(summary)
        summary["verdicts"] = [verdict_entry(v) for v in verdicts]
        summary["explained"] = [
            *explain(summary, verdicts, promised),
            *explain_ages(summary),
            *explain_restarts(summary),
        ]
        analyses.append(RunAnalysis(log, result, summary, verdicts, warnings))
    return analyses, stats


def _promised(platform: str, settings: LBSettings | None) -> Platform | None:
    """What the LBs of a run promise: its platform's row, with the settings its daemon was
    configured with laid over it."""
    row = PLATFORMS.get(platform)
    return None if row is None else with_settings(row, settings)


def verdict_entry(verdict: Verdict) -> VerdictEntry:
    return {
        "name": verdict.name,
        "status": verdict.status.value,
        "message": verdict.message,
        "observed": verdict.observed,
        "allowed": verdict.allowed,
    }


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
        analysis.log, analysis.replay, analysis.summary, analysis.verdicts, analysis.warnings, stats
    )
    html_path.write_text(render_run_report(report), encoding="utf-8")
    return [summary_path, junit_path, html_path]


def run_dir(out: Path, run_id: str, several: bool) -> Path:
    if not several:
        return out
    return out / (re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._") or "run")


# The bracket is read by people who never saw the tool: say once what it is.
BOUND_NOTE = "[bound]: where the true reaction lies, given the sampling; ? = not bounded"


def describe(analysis: RunAnalysis) -> list[str]:
    """The run as text: what the summary and the verdicts say."""
    s, run, result = analysis.summary, analysis.log.run, analysis.replay
    samples = sum(x["samples"] for x in s["streams"])
    lines = [
        f"run {run.run_id} · platform {s['platform']} · prober {run.version} · "
        f"{result.end_t:.1f} s · {samples} requests · {len(result.windows)} shutdown windows",
        *filter(None, [abrupt_text(s)]),
        edges_line(analysis.verdicts),
        "",
    ]
    if result.windows:
        rows = [
            [
                shutting_label(w, result.instances),
                w.host,
                f"{w.delay:g} s",
                f"{w.t0:.2f} s",
                f"± {(w.t0_hi - w.t0_lo) / 2:.2f} s",
                w.closed_by.value,
                str(sum(x.late for x in w.streams)),
                str(sum(x.failures for x in w.streams)),
            ]
            for w in result.windows
        ]
        headers = [
            "instance",
            "apiserver",
            "delay",
            "T0",
            "uncertainty",
            "closed by",
            "late",
            "failed",
        ]
        lines += [*table(headers, rows), ""]
    rows = []
    for worst in s["worst"]:
        key = (worst["lb"], worst["protocol"], worst["connection"])
        mine = [v for v in analysis.verdicts if v.key == key]
        routing = next((v.status.value for v in mine if v.stream is None), "-")
        available = sorted({v.status.value for v in mine if v.stream is not None})
        rows.append(
            [
                *key,
                bounded(worst["reaction"], worst["reaction_lo"], worst["reaction_hi"]),
                routing,
                seconds(worst["disruption_seconds"]),
                "/".join(available) or "-",
            ]
        )
    headers = [
        "lb",
        "protocol",
        "connection",
        "worst reaction [bound]",
        "stop routing",
        "disruption",
        "available",
    ]
    lines += table(headers, rows)
    lines.append(BOUND_NOTE)
    lines += same_node_lines(s)
    resent: Counter[str] = Counter()
    for stream in s["streams"]:
        resent.update(stream.get("retried", {}))
    if resent:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(resent.items()))
        lines.append(
            f"sent again once on a new connection, as Go's transport would: {sum(resent.values())}"
            f" ({reasons}); answered then, they are no disruption"
        )
    stopped = sum(stream.get("stopped", 0) for stream in s["streams"])
    if stopped:
        lines.append(
            f"cut by the daemon's stop, past its grace: {stopped} requests"
            " (class stopped: counted, no disruption, no failure)"
        )
    explained = s.get("explained", [])
    if explained:
        lines += ["", "what each LB's own settings promise, and what it did:", *explained]
    lines += age_lines(s.get("connection_ages"))
    lines += restart_lines(s.get("restarts"))
    lines += watch_lines(s.get("watches"), analysis.verdicts)
    for verdict in analysis.verdicts:
        if verdict.status is Status.FAILED:
            lines += ["", f"FAIL {verdict.name}", *(f"  {d}" for d in verdict.details)]
    return lines


def watch_lines(section: Mapping[str, Any] | None, verdicts: Sequence[Verdict]) -> list[str]:
    """The watch streams as a table: what each saw and its three tests' outcomes."""
    if not section or not section["streams"]:
        return []
    rows = []
    for entry in section["streams"]:
        mine = [v.status.value for v in verdicts if v.stream == entry["stream"]]
        ends = sum(n for how, n in entry["ends"].items() if how != "stopped")
        rows.append(
            [
                entry["lb"],
                entry["protocol"],
                str(entry["established"]),
                str(ends),
                str(entry["doomed"]),
                seconds(entry["reestablish"]["max"]),
                seconds(entry["blind_seconds"]),
                "/".join(mine) or "-",
            ]
        )
    headers = ["lb", "protocol", "watches", "ends", "doomed", "re-establish max", "blind",
               "re-establish/not doomed/not blind"]  # fmt: skip
    return ["", *table(headers, rows)]


def analyze_command(
    paths: Sequence[Path],
    *,
    platform: str | None,
    thresholds_path: Path | None,
    out: Path,
    skip_bad_lines: bool,
    pod_logs: bool = False,
    watch_reestablish_within: float = REESTABLISH_WITHIN,
    watch_blind_within: float = BLIND_WITHIN,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    thresholds = load_thresholds(thresholds_path) if thresholds_path else None
    analyses, stats = analyze_runs(
        paths,
        platform=platform,
        thresholds=thresholds,
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
