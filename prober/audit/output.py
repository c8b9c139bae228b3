"""`prober audit summarize`: what it reads, shows and writes (a table, `audit-summary.json`,
JUnit per apiserver), and its exit code: 1 with `--check` where a request came late."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO
from xml.etree import ElementTree as ET

from prober.audit.evidence import ProberEvidence, read_prober_logs, read_shutdown_events
from prober.audit.files import InputError, discover
from prober.audit.own import prober_stream
from prober.audit.summary import AuditSummary, summarize
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.models import rfc3339

SUMMARY_FILE = "audit-summary.json"
JUNIT_FILE = "junit-audit.xml"
TABLE_ROWS = 50
SUITE = "prober audit"


def test_name(apiserver: str) -> str:
    return (
        f"[sig-api-machinery] kube-apiserver/{apiserver} "
        "should not receive requests late in graceful termination"
    )


def render_table(summary: AuditSummary) -> str:
    stats = summary.stats
    lines = [
        f"{len(summary.files)} files, {stats.events} events, {stats.bad_lines} bad lines"
        + (f" ({_counts(stats.bad)})" if stats.bad else "")
        + f", {sum(summary.late_by_apiserver.values())} late requests"
        + (f" ({summary.own_late} of them the prober's own, by User-Agent)"
           if summary.own_late else ""),
    ]  # fmt: skip
    groups = summary.late_groups()
    if groups:
        rows = [
            [
                key[0],
                str(a.count),
                _short(a.first),
                _short(a.last),
                _agent(key[1]),
                *(v or "-" for v in key[2:]),
            ]
            for key, a in groups[:TABLE_ROWS]
        ]
        header = ["APISERVER", "LATE", "FIRST", "LAST", "USER AGENT", "SOURCE IP", "USER"]
        lines += ["", *_table([*header, "VERB", "RESOURCE"], rows)]
        if len(groups) > TABLE_ROWS:
            lines.append(f"... {len(groups) - TABLE_ROWS} more groups in {SUMMARY_FILE}")
    else:
        lines.append("no late requests")
    if summary.spans:
        rows = [
            [
                t.apiserver + ("" if t.audited else " (no audit log)"),
                t.span.source,
                _short(t.span.start),
                _short(t.span.end),
                str(t.requests),
                str(t.late),
                ", ".join(f"{k} {v}" for k, v in t.user_agents.most_common(3)) or "-",
            ]
            for t in summary.spans
        ]
        header = ["APISERVER", "FROM", "SHUTDOWN START", "END", "REQUESTS", "LATE", "TOP AGENTS"]
        lines += ["", "requests received during shutdowns:", *_table(header, rows)]
    if summary.evidence is not None:
        rows = [
            [key[0], key[1], str(a.count), str(a.failed), _short(a.first), _short(a.last)]
            for key, a in sorted(summary.prober_late.items())
        ]
        matched = sum(a.count for a in summary.prober_late.values())
        lines += ["", f"of the late requests, {matched} were the prober's own"]
        if rows:
            header = ["APISERVER", "STREAM", "LATE", "FAILED", "FIRST", "LAST"]
            lines += _table(header, rows)
    if summary.problems.total:
        lines += ["", f"{summary.problems.total} problems, first ones:"]
        lines += [f"  {p}" for p in summary.problems.kept[:10]]
    lines += [f"note: {n}" for n in summary.notes]
    return "\n".join(lines)


def _agent(user_agent: str | None) -> str:
    """A late group's User-Agent, marked where it is the prober's own (`audit.own`)."""
    if user_agent is None:
        return "-"
    return f"{user_agent} (ours)" if prober_stream(user_agent) is not None else user_agent


def _counts(counter: dict[str, int]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(counter.items()))


def _short(epoch: float | None) -> str:
    return "-" if epoch is None else rfc3339(epoch)[:23] + "Z"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]


def junit_xml(summary: AuditSummary) -> str:
    """One test per apiserver, failing when it received any request late."""
    suite = ET.Element("testsuite", name=SUITE)
    failures = 0
    for apiserver in summary.apiservers:
        case = ET.SubElement(suite, "testcase", name=test_name(apiserver), classname=SUITE)
        case.set("time", "0")
        count = summary.late_by_apiserver[apiserver]
        if count:
            failures += 1
            message = f"kube-apiserver/{apiserver} received {count} requests late"
            failure = ET.SubElement(case, "failure", message=message)
            failure.text = _failure_text(summary, apiserver, message)
    suite.set("tests", str(len(summary.apiservers)))
    suite.set("failures", str(failures))
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _failure_text(summary: AuditSummary, apiserver: str, message: str) -> str:
    lines = [
        message + " (on connections accepted after 80% of its shutdown delay): "
        "a load balancer kept sending it new connections after /readyz went false.",
    ]
    for key, a in summary.late_groups():
        if key[0] == apiserver:
            agent = key[1] and _agent(key[1])  # marked where it is the prober's own
            who = " ".join(
                f"{n}={v}" for n, v in zip(("agent", "ip", "user"), (agent, *key[2:4]), strict=True)
                if v
            )  # fmt: skip
            lines.append(
                f"{a.count} x {key[4] or '-'} {key[5] or '-'} {who} "
                f"first={_short(a.first)} last={_short(a.last)}"
            )
    return "\n".join(lines)


def write_outputs(summary: AuditSummary, out: Path, *, junit: bool) -> list[Path]:
    """Write the summary (and JUnit) into `out`, creating it; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [_write(out / SUMMARY_FILE, json.dumps(summary.to_json(), indent=2) + "\n")]
    if junit:
        written.append(_write(out / JUNIT_FILE, junit_xml(summary)))
    return written


def _write(path: Path, text: str) -> Path:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return path


def summarize_command(
    paths: Sequence[Path],
    *,
    node: str | None = None,
    events: Sequence[Path] = (),
    shutdown_events: Sequence[Path] = (),
    out: Path = Path("."),
    junit: bool = False,
    check: bool = False,
    max_line_bytes: int,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    families, notes = discover(paths, node)
    if not families:
        raise InputError(f"no audit logs found in {', '.join(map(str, paths))}")
    evidence: ProberEvidence | None = read_prober_logs(events) if events else None
    spans = [span for path in shutdown_events for span in read_shutdown_events(path)]
    summary = summarize(families, evidence=evidence, spans=spans, max_line_bytes=max_line_bytes)
    summary.notes[:0] = notes
    print(render_table(summary), file=stdout)
    with writing(f"to {out}"):
        written = write_outputs(summary, out, junit=junit)
    for path in written:
        print(f"wrote {path}", file=stdout)
    late = sum(summary.late_by_apiserver.values())
    return ExitCode.FAILED if check and late else ExitCode.OK
