"""`prober lab --compare-watch-grace`: the runs, the table a person reads, the JSON a script
reads (`watch-grace.json`), and `--check` over every run."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from prober.common.exits import ExitCode
from prober.core.durations import format_go_duration
from prober.lab.commands import report, run_or_interrupted
from prober.lab.infra.options import LabOptions
from prober.lab.run import LabError, LabResult, profile_for
from prober.lab.watchgrace import (
    GraceComparison,
    GraceRun,
    StreamRow,
    check_options,
    compare_watch_grace,
    to_json,
)
from prober.report.format.tables import seconds, table

HEADERS = ["lb", "protocol", "grace", "ends", "how", "doomed", "re-established", "p50", "p99"]
HEADERS += ["blind", "429 requests", "429 watch"]
TRUTH_HEADERS = ["grace", "apiserver", "drained", "cut", "first end", "last end"]
TRUTH_HEADERS += ["listener closed", "429s answered"]


def grace_command(
    options: LabOptions,
    platforms: Sequence[str],
    graces: Sequence[float],
    *,
    out: Path,
    check: bool,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    check_options(options, graces)
    failed = False
    for platform in platforms:
        run_out = out / platform if len(platforms) > 1 else out
        if run_out.exists() and any(run_out.iterdir()):
            raise LabError(f"{run_out}: output directory is not empty; each run needs its own")
        mine = replace(options, platform=platform)
        work = compare_watch_grace(mine, graces, run_out, _printer(stdout, mine, graces))
        ran = run_or_interrupted(work, run_out, stderr)
        if ran is None:
            return ExitCode.INTERRUPTED
        comparison, results = ran
        for result in results:
            _write_report(result)
        print("", file=stdout)
        print("\n".join(lines(comparison)), file=stdout)
        path = run_out / "watch-grace.json"
        path.write_text(json.dumps(to_json(comparison), indent=2) + "\n", encoding="utf-8")
        for run in comparison.runs:
            for problem in run.problems:
                print(f"CHECK grace {format_go_duration(run.grace)}: {problem}", file=stdout)
        print("", file=stdout)
        for run in comparison.runs:
            print(f"wrote {run.out} (its report: {run.out / 'report.txt'})", file=stdout)
        print(f"wrote {path}", file=stdout)
        failed = failed or any(run.problems for run in comparison.runs)
    return ExitCode.FAILED if check and failed else ExitCode.OK


def _printer(stdout: TextIO, options: LabOptions, graces: Sequence[float]) -> object:
    shown = ", ".join(format_go_duration(g) for g in graces)
    scale = profile_for(options).time_scale
    print(
        f"prober lab: platform {options.platform}, scenario {options.scenario}, time scale "
        f"{scale:g}, the same run once per watch grace ({shown}, before the time scale)",
        file=stdout,
    )

    def say(text: str) -> None:
        print(f"  {text}", file=stdout, flush=True)

    return say


def _write_report(result: LabResult) -> None:
    """Each run's own report, as `prober lab` prints it, beside its files."""
    text = io.StringIO()
    report(result, text)
    (result.out / "report.txt").write_text(text.getvalue(), encoding="utf-8")


def lines(comparison: GraceComparison) -> list[str]:
    c = comparison
    found = [
        f"watches per LB x protocol, {c.platform}, {c.scenario}, time scale {c.time_scale:g} "
        f"(shutdown delay {c.shutdown_delay:.1f} s); each grace is given before the time "
        "scale, and every time below is as measured, on it:",
        "  ends: watch ends but the daemon's stop; doomed: re-watches established on a server "
        "answering shutdown=true; re-established: ends followed by a watch, p50/p99 the time "
        "it took; blind: seconds the heartbeat went unseen; 429: request samples of this LB x "
        "protocol and the stream's LISTs and WATCHes answered 429",
    ]
    keys = [(r.lb, r.protocol) for r in c.runs[0].rows] if c.runs else []
    by_run = [(run, {(r.lb, r.protocol): r for r in run.rows}) for run in c.runs]
    rows = [_row(run, mine[key]) for key in keys for run, mine in by_run if key in mine]
    found += table(HEADERS, rows)
    found += [
        "",
        "the apiservers' side (their truth logs), per shutdown: watches the drain ended and "
        "watches cut at exit (real and synthetic), the first and last of those ends and the "
        "listener's close in seconds after NotAcceptingNewRequest, and 429s to every client "
        "(without a grace the cut comes at the HTTP server's shutdown timeout after the "
        "listener closed: genericapiserver's 2 s, which the time scale leaves as it is):",
    ]
    truth = [
        [
            f"{format_go_duration(run.grace)} ({format_go_duration(run.scaled)})",
            s.apiserver,
            str(s.drained),
            str(s.cut),
            seconds(s.first, 3),
            seconds(s.last, 3),
            seconds(s.stopped, 3),
            str(s.refused),
        ]
        for run in c.runs
        for s in run.shutdowns
    ]
    found += table(TRUTH_HEADERS, truth)
    return found


def _row(run: GraceRun, r: StreamRow) -> list[str]:
    return [
        r.lb,
        r.protocol,
        format_go_duration(run.grace),
        str(r.ends),
        ", ".join(f"{n} {how}" for how, n in sorted(r.hows.items())) or "-",
        str(r.doomed),
        str(r.reestablished),
        seconds(r.reestablish_p50, 3),
        seconds(r.reestablish_p99, 3),
        seconds(r.blind, 3),
        str(r.refused_requests),
        str(r.refused_watches),
    ]
