"""The report layer's commands (`prober analyze`, `export`, `thresholds` and its `--check`,
`recommend`, `dashboard`, `origin`): what they read, print and write, and their exit codes.
The work is in the modules they call; a `UserError` they raise is printed by `prober.cli`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, cast

from prober.common import filekinds
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.report.analyze import analyze_runs, describe, run_dir, write_outputs
from prober.report.documents import (
    RecommendationPart,
    RecommendationsDocument,
    RegressionDocument,
    SummaryDocument,
)
from prober.report.errors import BadInput
from prober.report.export import export_rows, parse_labels, read_summary, write_rows
from prober.report.history import RunFacts
from prober.report.html_dashboard import load_snapshots, render_trend_page, span
from prober.report.html_thresholds import render_dashboard
from prober.report.jsonio import read_json, write_json
from prober.report.keys import key_name
from prober.report.origin import write_origin_files
from prober.report.queryresult import load_query_result, runs_in
from prober.report.recommend import Part, Recommendation, recommend
from prober.report.regression import Regression, check_regression
from prober.report.tables import seconds, table
from prober.report.thresholds import aggregate, load_thresholds, period_of, to_document
from prober.report.watch_verdicts import BLIND_WITHIN, REESTABLISH_WITHIN, WatchAllowed


def summary_files(args: Sequence[Path]) -> list[Path]:
    """Summary files named directly, and every summary.json under a directory."""
    files: list[Path] = []
    for arg in args:
        if arg.is_dir():
            found = sorted(arg.rglob("summary.json"))
            if not found:
                raise BadInput(f"{arg}: no summary.json in this directory")
            files += found
        elif arg.is_file():
            files.append(arg)
        else:
            raise BadInput(f"{arg}: no such file")
    return files


def load_facts(args: Sequence[Path], stderr: TextIO) -> list[RunFacts]:
    """Every run once: a summary copied twice into the artifacts would count double."""
    seen: dict[tuple[str, str], str] = {}
    facts = []
    for path in summary_files(args):
        run, _ = read_summary(path)
        ident = (run.platform.lower(), run.run_id)
        if ident in seen:
            print(
                f"warning: {path}: run {run.run_id} already read from {seen[ident]}: skipped",
                file=stderr,
            )
            continue
        seen[ident] = str(path)
        facts.append(run)
    return facts


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


def export_command(
    summaries: Sequence[Path],
    *,
    labels: Sequence[str],
    output: Path | None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Warehouse rows (JSON lines) of the summaries, on stdout or into `output`."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parsed = parse_labels(labels)
    paths = summary_files(summaries)
    if output is None:
        count = write_rows(paths, parsed, stdout)
    else:
        # Into a file beside it, renamed when whole: a load never takes half an export.
        partial = output.with_name(output.name + ".partial")
        with writing(output), partial.open("w", encoding="utf-8") as stream:
            count = write_rows(paths, parsed, stream)
        with writing(output):
            partial.replace(output)
    print(f"exported {count} rows from {len(paths)} summaries", file=stderr)
    return ExitCode.OK


def thresholds_command(
    summaries: Sequence[Path],
    *,
    output: Path | None,
    out: Path,
    min_runs: int,
    query_result: Path | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """From summaries, or from the warehouse query's result (`query_result`): the same
    thresholds.json either way."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if query_result is not None:
        entries, period = load_query_result(query_result, min_runs)
        runs = sources = runs_in(entries)
    else:
        facts = load_facts(summaries, stderr)
        entries, period = aggregate(facts, min_runs), period_of(facts)
        runs = sources = len(facts)
    json_path = output or out / "thresholds.json"
    html_path = out / "thresholds.html"
    with writing(json_path):
        out.mkdir(parents=True, exist_ok=True)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(json_path, to_document(entries, period))
    with writing(html_path):
        html_path.write_text(render_dashboard(entries, runs, sources), encoding="utf-8")
    rows = [
        [
            e.platform,
            e.lb.value,
            e.protocol.value,
            e.connection.value,
            e.metric,
            seconds(e.p50),
            seconds(e.p95),
            seconds(e.p99),
            f"{e.allowed:.0f} s",
            str(e.runs),
            "yes" if e.usable else f"no (< {min_runs})",
        ]
        for e in entries
    ]
    headers = [
        "platform",
        "lb",
        "protocol",
        "connection",
        "metric",
        "P50",
        "P95",
        "P99",
        "allowed",
        "runs",
        "usable",
    ]
    print("\n".join(table(headers, rows)), file=stdout)
    print(f"\nwrote {json_path}\nwrote {html_path}", file=stdout)
    return ExitCode.OK


def check_command(
    summaries: Sequence[Path],
    *,
    history: Path,
    out: Path,
    quantile: str,
    alpha: float,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    thresholds = load_thresholds(history)
    facts = load_facts(summaries, stderr)
    results = check_regression(facts, thresholds, quantile=quantile, alpha=alpha)
    path = out / "regression.json"
    with writing(path):
        out.mkdir(parents=True, exist_ok=True)
        write_json(path, _regression_document(results, quantile, alpha, len(facts)))
    rows = []
    for r in results:
        test = r.test
        outcome = "REGRESSED" if r.regressed else ("ok" if test else "skipped")
        numbers = (
            [f"{test.k}/{test.n}", seconds(test.threshold), f"{test.p_value:.4f}"]
            if test
            else ["-", "-", "-"]
        )
        rows.append([r.platform, key_name(r.key), r.metric, *numbers, outcome, r.history])
    headers = [
        "platform",
        "lb/protocol/connection",
        "metric",
        f"runs > {quantile}",
        f"history {quantile}",
        "p-value",
        "verdict",
        "history used",
    ]
    print(
        f"{len(facts)} recent runs against {history}: one-sided binomial exceedance test "
        f"of the history's {quantile.upper()}, Holm-corrected at alpha {alpha:g}",
        file=stdout,
    )
    print("\n".join(table(headers, rows)), file=stdout)
    if not any(r.test for r in results):
        print(
            f"warning: {history}: no usable history for these runs: nothing was tested", file=stderr
        )
    print(f"\nwrote {path}", file=stdout)
    return ExitCode.FAILED if any(r.regressed for r in results) else ExitCode.OK


def _regression_document(
    results: Sequence[Regression], quantile: str, alpha: float, runs: int
) -> RegressionDocument:
    return {
        "v": 1,
        "test": "one-sided exact binomial test on exceedances of the historical quantile, Holm",
        "quantile": quantile,
        "alpha": alpha,
        "runs": runs,
        "results": [
            {
                "platform": r.platform,
                "lb": r.key[0].value,
                "protocol": r.key[1].value,
                "connection": r.key[2].value,
                "metric": r.metric,
                "runs": r.test.n if r.test else None,
                "exceeding": r.test.k if r.test else None,
                "threshold": r.test.threshold if r.test else None,
                "p_value": r.test.p_value if r.test else None,
                "regressed": r.regressed,
                "history": r.history,
            }
            for r in results
        ],
    }


def recommend_command(
    thresholds_path: Path,
    *,
    platform: str | None,
    buffer: float,
    out: Path | None,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    thresholds = load_thresholds(thresholds_path)
    if not any(e.metric == "reaction" for e in thresholds.entries):
        raise BadInput(f"{thresholds_path}: no reaction entries to recommend from")
    found = recommend(thresholds, buffer)
    if platform is not None:
        found = [r for r in found if r.platform == platform.lower()]
        if not found:
            raise BadInput(
                f"{thresholds_path}: no history for platform {platform!r} (it has "
                f"{', '.join(thresholds.platforms) or 'nothing'})"
            )
    written = None
    if out is not None:
        written = out / "recommendations.json"
        with writing(written):
            out.mkdir(parents=True, exist_ok=True)
            write_json(written, _recommend_document(found, buffer))
    rows = [
        [
            r.platform,
            _p99(r.new),
            _delay(r.new)
            if r.new is not None or r.prior is None
            else f"{r.prior.delay:.0f} s (LB settings)",
            _p99(r.reused),
            _delay(r.reused),
            f"{r.today:.0f} s ({r.today_source})",
        ]
        for r in found
    ]
    headers = [
        "platform",
        "P99 reaction, new",
        "recommended",
        "P99 reaction, reused",
        "recommended (reused)",
        "today",
    ]
    print(
        f"shutdown-delay-duration = worst late arrival / 0.8 + {buffer:g} s buffer, "
        "rounded up to 5 s",
        file=stdout,
    )
    print("\n".join(table(headers, rows)), file=stdout)
    for r in found:
        print(f"{r.platform}: {r.why}", file=stdout)
    if written is not None:
        print(f"\nwrote {written}", file=stdout)
    return ExitCode.OK


def _p99(part: Part | None) -> str:
    if part is None:
        return "-"
    return f"{part.entry.p99:.1f} s ({part.entry.lb} {part.entry.protocol})"


def _delay(part: Part | None) -> str:
    return "-" if part is None else f"{part.delay:.0f} s"


def _recommend_document(found: Sequence[Recommendation], buffer: float) -> RecommendationsDocument:
    def part(p: Part | None) -> RecommendationPart | None:
        if p is None:
            return None
        e = p.entry
        return {
            "p99": e.p99,
            "lb": e.lb.value,
            "protocol": e.protocol.value,
            "runs": e.runs,
            "delay": p.delay,
        }

    return {
        "v": 1,
        "rule": "delay >= p99 reaction / 0.8 + buffer, rounded up to 5 s",
        "buffer": buffer,
        "platforms": [
            {
                "platform": r.platform,
                "today": r.today,
                "new": part(r.new),
                "reused": part(r.reused),
                "prior": None
                if r.prior is None
                else {
                    "lb": r.prior.lb.value,
                    "budget": r.prior.budget,
                    "delay": r.prior.delay,
                },
                "recommended": r.delay,
                "why": r.why,
            }
            for r in found
        ],
    }


def dashboard_command(
    paths: Sequence[Path],
    *,
    out: Path,
    stdout: TextIO | None = None,
) -> int:
    """Many thresholds.json, one per period: the latest side by side, each LB's P99 over time."""
    stdout = stdout or sys.stdout
    snapshots = load_snapshots(paths)
    html = render_trend_page(snapshots)
    path = out / "dashboard.html"
    with writing(path):
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    print(f"{span(snapshots)}\nwrote {path}", file=stdout)
    return ExitCode.OK


def origin_command(
    inputs: Sequence[Path],
    *,
    labels: Sequence[str],
    out: Path,
    events: bool = False,
    pod_logs: bool = False,
    stdout: TextIO | None = None,
) -> int:
    """Each run's results in OpenShift CI's own files (`origin.write_origin_files`), in `out`,
    or in one directory per run there when there are several. The runs come from summaries,
    or from event logs (`events`) or pod logs (`pod_logs`) replayed as `prober analyze` does."""
    stdout = stdout or sys.stdout
    written: list[Path] = []
    parsed = parse_labels(labels)
    runs = _origin_runs(inputs, parsed, events or pod_logs, pod_logs)
    for summary in runs:
        target = run_dir(out, summary["run_id"], len(runs) > 1)
        with writing(f"into {target}"):
            written += write_origin_files(summary, target, labels=parsed)
    for path in written:
        print(f"wrote {path}", file=stdout)
    return ExitCode.OK


def _origin_runs(
    inputs: Sequence[Path], labels: dict[str, str | bool], logs: bool, pod_logs: bool
) -> list[SummaryDocument]:
    if logs:
        analyses, _ = analyze_runs(inputs, pod_logs=pod_logs)
        return [analysis.summary for analysis in analyses]
    summaries = []
    for path in summary_files(inputs):
        # The export's reading checks every field the files are built from, naming the
        # file: what it passed is a document `write_origin_files` can build from.
        list(export_rows(path, labels))
        summaries.append(cast(SummaryDocument, read_json(path, filekinds.SUMMARY)))
    return summaries
