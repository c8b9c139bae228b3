"""`prober lab`: runs, the table a person reads, the JSON a script reads, and `--check`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import io
import json
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from prober.common.exits import ExitCode
from prober.lab import comparetable
from prober.lab.infra.options import LabOptions
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.judges import lossblind, nodeloss, restarts, watchcheck
from prober.lab.judges.inbounds.run import LAB_RESULT, check_lab_run
from prober.lab.judges.informers import HEADERS as INFORMER_HEADERS
from prober.lab.judges.informers import Side
from prober.lab.judges.onnode import NodeResult
from prober.lab.judges.restartcheck import rows_table
from prober.lab.judges.survival import HEADERS as SURVIVAL_HEADERS
from prober.lab.judges.survival import rows as survival_rows
from prober.lab.run import LabError, LabResult, default_scale, run_lab
from prober.report.documents.run_text import describe
from prober.report.format.tables import seconds, table
from prober.report.verdicts.counts import counts_text
from prober.report.verdicts.verdicts import plural

T = TypeVar("T")


def default_out() -> Path:
    return Path("lab-out") / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def lab_command(
    options: LabOptions,
    platforms: Sequence[str],
    *,
    out: Path,
    repeat: int,
    check: bool,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    several = repeat > 1 or len(platforms) > 1
    failed = False
    for platform in platforms:
        scale = options.time_scale
        if scale is None:
            scale = default_scale(PLATFORMS[platform])
        print(
            f"prober lab: platform {platform}, scenario {options.scenario}, time scale {scale:g}"
            + ("" if scale == 1 else " (every delay and health-check interval multiplied by it)"),
            file=stdout,
        )
        for index in range(repeat):
            run_out = out / f"{platform}-{index + 1:02d}" if several else out
            work = run_lab(replace(options, platform=platform), run_out, _printer(stdout))
            result = run_or_interrupted(work, run_out, stderr)
            if result is None:
                return ExitCode.INTERRUPTED
            failed = bool(report(result, stdout)) or failed
    if check and failed:
        return ExitCode.FAILED
    return ExitCode.OK


def run_or_interrupted(work: Coroutine[Any, Any, T], out: Path, stderr: TextIO) -> T | None:
    """Run one lab's work to its end; None when Ctrl-C ended it first (said on `stderr`)."""
    try:
        return asyncio.run(work)
    except OSError as exc:  # a port, a file or a process the lab could not have
        raise LabError(str(exc)) from None
    except KeyboardInterrupt:
        print(f"prober lab: interrupted; its processes are stopped ({out})", file=stderr)
        return None


def verdict_line(result: LabResult) -> str:
    """What the run proved, in one line, so that neither outcome is read for the other:
    whether the measurement held against the truth (what `--check` exits on), and what
    junit.xml's verdicts said of the LBs, in its counts (a slow LB fails those by design,
    and the check still passes)."""
    if result.problems:
        measured = f"measurement failed ({plural(len(result.problems), 'check')} above)"
    else:
        inside = truths_inside(result)
        held = (
            f"{plural(inside, 'truth')} inside their bounds"
            if inside
            else "no LB reaction to hold against a truth: no shutdown window"
        )
        measured = f"measurement passed ({held})"
    line = f"prober lab: {measured}; LB verdicts: {counts_text(result.analysis.verdicts)}"
    if result.node is None:
        return line
    return f"{line}; on {result.node.hostname}: {counts_text(result.node.analysis.verdicts)}"


def truths_inside(result: LabResult) -> int:
    """The LB reactions whose truth the comparison found inside the measured bound."""
    return sum(
        row.truth is not None and row.outside(result.tolerance) is None
        for shutdown in result.results
        for row in shutdown.rows
    )


def _printer(stdout: TextIO) -> Any:
    def say(text: str) -> None:
        print(f"  {text}", file=stdout, flush=True)

    return say


def report(result: LabResult, stdout: TextIO) -> tuple[str, ...]:
    """Print the run and its comparison with the truth, check what it printed and wrote
    (`lab.judges.inbounds`), write lab-result.json, and say what the run proved; its problems."""
    text = printed(result)
    stdout.write(text)
    result = checked(result, text)
    path = write_result(result)
    print("", file=stdout)
    logs = [result.out / "gathered"] if result.fates else [result.out / "events.jsonl"]
    for written in (*result.written, path, *logs, result.out / "logs"):
        print(f"wrote {written}", file=stdout)
    # What the run proved comes last, where a reader's eye lands: the findings and checks
    # it stands on just above it.
    print("", file=stdout)
    for finding in result.findings:
        print(f"FINDING {finding}", file=stdout)
    for problem in result.problems:
        print(f"CHECK {problem}", file=stdout)
    print(verdict_line(result), file=stdout)
    return result.problems


def checked(result: LabResult, text: str) -> LabResult:
    """The result with the problems of its outputs' bounds, as printed (`text`) and written."""
    outside = check_lab_run(result.out, text, to_json(result)).problems()
    return replace(result, problems=(*result.problems, *outside))


def write_result(result: LabResult) -> Path:
    path = result.out / LAB_RESULT
    path.write_text(json.dumps(to_json(result), indent=2) + "\n", encoding="utf-8")
    return path


def printed(result: LabResult) -> str:
    """The run's tables and its comparison with the truth, as `prober lab` prints them."""
    stdout = io.StringIO()
    print("", file=stdout)
    print("\n".join(describe(result.analysis)), file=stdout)
    print("", file=stdout)
    print(
        "measured against the truth (reaction: seconds after T0 the LB still routed; bound: "
        "where the sampling puts the true value; the truth must lie inside it):",
        file=stdout,
    )
    print("\n".join(comparetable.rows_table(result.results, result.tolerance)), file=stdout)
    print("", file=stdout)
    for line in comparetable.t0_lines(result.results):
        print(line, file=stdout)
    print("", file=stdout)
    print("sampling achieved per stream (gap between consecutive requests):", file=stdout)
    print("\n".join(table(GAP_HEADERS, _gap_rows(result))), file=stdout)
    if result.load is not None:
        print(result.load.describe(), file=stdout)
    if result.answered is not None:
        print(result.answered.describe(), file=stdout)
    _restarts(result, stdout)
    if result.watches is not None and result.watches.rows:
        print("", file=stdout)
        print(
            "watch streams against the truth (landed: on the server named, inside its landing "
            "interval; ends and re-establishes judged where the server ended the watch):",
            file=stdout,
        )
        print("\n".join(table(watchcheck.HEADERS, watchcheck.table_rows(result.watches))),
              file=stdout)  # fmt: skip
    if result.informers:
        print("", file=stdout)
        print(
            "the daemon's watch streams beside client-go v0.37.2's informers on the same "
            "heartbeat Lease, through the same LB (blind: a write not seen within the daemon's "
            "threshold; watch-list: client-go's default sync; list: LIST first, as the daemon):",
            file=stdout,
        )
        print("\n".join(table(INFORMER_HEADERS, [s.row() for s in result.informers])),
              file=stdout)  # fmt: skip
    for loss in result.losses:
        print("", file=stdout)
        print(
            f"{loss.hostname} vanished for {loss.back - loss.lost:.3f} s (seconds after the loss; "
            "last: the last failed request sent, the LB's measured reaction on new connections; "
            "truth: when the LB marked the node down):",
            file=stdout,
        )
        print("\n".join(table(nodeloss.HEADERS, nodeloss.rows(loss))), file=stdout)
        _watch_loss(loss, stdout)
    if result.node is not None:
        _node(result.node, result.tolerance, stdout)
    if result.fates:
        print("", file=stdout)
        print(
            "what each prober container measured, and what a gather could still read:", file=stdout
        )
        print("\n".join(table(SURVIVAL_HEADERS, survival_rows(result.fates))), file=stdout)
    return stdout.getvalue()


def _node(node: NodeResult, tolerance: float, stdout: TextIO) -> None:
    """The daemon on a master (`--prober-on`): what it measured, path by path, against the
    truth, and what charging its same-node results to the LB would have said."""
    hairpin = ", ".join(str(lb) for lb in node.hairpins)
    print("", file=stdout)
    print(
        f"the prober on {node.hostname} ({hairpin} hairpins there: its requests to it reach "
        f"{node.hostname}'s own apiserver whatever the LB's health); {node.labelled} "
        "same-node samples in its log:",
        file=stdout,
    )
    print("\n".join(describe(node.analysis)), file=stdout)
    print("", file=stdout)
    print(f"its LB path against the truth (no {hairpin}: it never reached the LB):", file=stdout)
    print("\n".join(comparetable.rows_table(node.results, tolerance)), file=stdout)
    print("", file=stdout)
    print(
        f"its same-node path against the truth ({node.hostname}'s apiserver answers it until it "
        "stops listening; through another LB, as that LB routes):",
        file=stdout,
    )
    print("\n".join(comparetable.rows_table(node.same_node, tolerance)), file=stdout)
    if node.charged:
        print("", file=stdout)
        print(
            "charged to the LB instead, as a prober that knows no node would, the same-node "
            "results would say:",
            file=stdout,
        )
        for verdict in node.charged:
            print(f"  {verdict.status.value.upper()} {verdict.name}: {verdict.message}",
                  file=stdout)  # fmt: skip


def _restarts(result: LabResult, stdout: TextIO) -> None:
    lbs = {truth.lb: truth for truth in result.lb_truth}
    rows = restarts.rows(result.instances, lbs, result.platform)
    if not rows:
        return
    print("", file=stdout)
    print(
        "each restarted apiserver, from the truth (T1: its /readyz went true; marked up: the "
        "LB's first mark-up of it; early answers: what it answered before it could serve, "
        "by the LB its request named):",
        file=stdout,
    )
    print("\n".join(table(restarts.HEADERS, rows)), file=stdout)
    measured = rows_table(result.restarts) if result.restarts is not None else []
    if measured:
        print("", file=stdout)
        print(
            "each LB's add-back against the truth (seconds from T1 to the LB's mark-up; "
            "measured: to its first answer from the new process, with the bound):",
            file=stdout,
        )
        print("\n".join(measured), file=stdout)


def _watch_loss(loss: nodeloss.NodeLoss, stdout: TextIO) -> None:
    if not loss.watches:
        return
    print("", file=stdout)
    print(
        f"watches while {loss.hostname} was gone, as the heartbeat measured them (seconds after "
        "the loss; blind: its blind spells that began then; noticed: when the first began; "
        "ended: the first watch end while the node was gone):",
        file=stdout,
    )
    print("\n".join(table(lossblind.HEADERS, lossblind.rows(loss.watches))), file=stdout)
    for line in lossblind.per_protocol(loss.watches):
        print(line, file=stdout)
    beat = loss.heartbeat
    if beat is not None:
        print(
            f"heartbeat: {beat.writes} writes while the node was gone, {beat.failed} failed; "
            f"at most {beat.unacknowledged:.3f} s without an acknowledged write (the writer's "
            "outage: no watch can be shown blind then)",
            file=stdout,
        )


GAP_HEADERS = ["stream", "samples", "gap p50", "gap p99", "gap max", "skipped"]


def _gap_rows(result: LabResult) -> list[list[str]]:
    return [
        [
            s.stream,
            str(s.samples),
            seconds(s.gap_p50, 3),
            seconds(s.gap_p99, 3),
            seconds(s.gap_max, 3),
            ", ".join(f"{n} {reason}" for reason, n in s.skipped.items() if n) or "0",
        ]
        for s in result.streams
    ]


def to_json(result: LabResult) -> dict[str, Any]:
    return {
        "platform": result.platform.name,
        "scenario": result.scenario,
        "time_scale": result.platform.time_scale,
        "shutdown_delay": result.platform.shutdown_delay,
        "problems": list(result.problems),
        "findings": list(result.findings),
        "tolerance": result.tolerance,
        "load": None if result.load is None else dataclasses.asdict(result.load),
        "containers": [dataclasses.asdict(f) for f in result.fates],
        "node_losses": [dataclasses.asdict(loss) for loss in result.losses],
        "watches": []
        if result.watches is None
        else [dataclasses.asdict(row) for row in result.watches.rows],
        "answered_failed": [] if result.answered is None else list(result.answered.answered_failed),
        "retried": {} if result.answered is None else dict(result.answered.retried),
        "sampling": [
            {
                "stream": s.stream,
                "samples": s.samples,
                "gap_p50": s.gap_p50,
                "gap_p99": s.gap_p99,
                "gap_max": s.gap_max,
                "skipped": dict(s.skipped),
            }
            for s in result.streams
        ],
        "node": None if result.node is None else node_json(result.node),
        "informers": [_informer_json(s) for s in result.informers],
        "shutdowns": comparetable.shutdowns_json(result.results),
    }


def _informer_json(side: Side) -> dict[str, Any]:
    r = side.result
    return {
        "lb": str(side.lb), "protocol": str(side.protocol), "watcher": side.who,
        "established": r.established, "ends": dict(r.ends), "relists": dict(r.relists),
        "blind": r.blind, "lag_p99": r.lag(0.99),
    }  # fmt: skip


def node_json(node: NodeResult) -> dict[str, Any]:
    """The daemon on a master (`--prober-on`): its paths against the truth."""
    return {
        "hostname": node.hostname,
        "hairpins": [str(lb) for lb in node.hairpins],
        "same_node_samples": node.labelled,
        "problems": list(node.problems),
        "lb_path": comparetable.shutdowns_json(node.results),
        "same_node_path": comparetable.shutdowns_json(node.same_node),
        "charged": [
            {"name": v.name, "status": v.status.value, "message": v.message} for v in node.charged
        ],
    }
