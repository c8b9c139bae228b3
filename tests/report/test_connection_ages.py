"""`prober analyze` of an event log: the connection-age table, the 20 % rule per LB, its JUnit
test and where a reader finds them (the text, report.html), against the standard rollout,
whose external LB keeps its kept connections on a server past its delay (they fail) and whose
internal LB does not."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from junitparser import JUnitXml, Skipped

from prober.cli import main
from prober.common.segments import read_lines
from prober.core.budgets import PLATFORMS
from prober.core.connection_age import ConnectionAges
from prober.core.eventlog import encode
from prober.report.analyze import analyze_runs
from prober.report.documents.run_text import describe
from prober.report.results.connection_ages import phases_of
from prober.report.verdicts.age_verdicts import judge_ages
from prober.report.verdicts.identity import Case
from prober.report.verdicts.verdicts import Status
from tests.report.daemonlog import LiveOutput

EXTERNAL, INTERNAL = "external-lb", "internal-lb"
FAILED_PER_STREAM = 3 * 12  # three shutdowns, 12 refused requests each (past the 20 s delay)


def test_the_table_places_each_failure_by_its_connections_opening(rollout_log) -> None:
    path, live = rollout_log
    [analysis], _ = analyze_runs([path])
    section = analysis.summary["connection_ages"]
    # The replay gives the daemon's own table, which the log also holds: no warning.
    assert analysis.replay.ages == live.ages
    assert analysis.warnings == []
    rows = section["rows"]
    kept_failures = [r for r in rows if r["failed"]]
    assert {(r["lb"], r["connection"]) for r in kept_failures} == {(EXTERNAL, "reused")}
    for row in kept_failures:
        # Opened when the LB first sent the stream to the server, about T0: never past the mark.
        assert phases_of(row["opened"]) <= {"before", "delay_early"}
        # Met once the server had stopped (the bounds may leave the delay's very end).
        assert set(row["failed"]) <= {"after", "delay_late|after"}
        assert row["errors"] == {"connect_refused": sum(row["failed"].values())}
    assert sum(sum(r["failed"].values()) for r in kept_failures) == 2 * FAILED_PER_STREAM
    # The internal LB's kept connections left the server within 12 s: late answers only, all
    # met in the delay's first 80 %.
    internal = [r for r in rows if r["lb"] == INTERNAL and r["connection"] == "reused"]
    assert internal
    assert all(set(r["late"]) == {"delay_early"} and not r["failed"] for r in internal)
    # New connections are opened as they are sent: their late answers' phases are their own.
    for row in (r for r in rows if r["connection"] == "new"):
        assert set(row["late"]) <= set(row["opened"].split("|"))


def test_the_20_percent_rule_per_lb(rollout_log, tmp_path: Path) -> None:
    path, _ = rollout_log
    [analysis], _ = analyze_runs([path])
    findings = {f["lb"]: f for f in analysis.summary["connection_ages"]["findings"]}
    assert set(findings) == {EXTERNAL, INTERNAL}
    broken, held = findings[EXTERNAL], findings[INTERNAL]
    assert (broken["rule"], held["rule"]) == ("broken", "held")
    assert sum(broken["breaking"].values()) == 2 * FAILED_PER_STREAM
    assert broken["errors"] == {"connect_refused": 2 * FAILED_PER_STREAM}
    assert held["breaking"] == held["ambiguous"] == {}
    assert (
        "72 requests failed on connections opened before the delay's last 20 %" in (broken["text"])
    )
    # Each finding is an explained line, after the LB keys' own, before the add-back's.
    explained = analysis.summary["explained"]
    assert explained[-4:-2] == [f"aws {broken['text']}", f"aws {held['text']}"]
    # aws: the NLB resets established flows, so the rule cannot hold there: not judged, and
    # the message says why. Held on the internal LB: passed.
    verdicts = {v.name: v for v in analysis.verdicts}
    external = verdicts[Case.TWENTY_PERCENT.format(lb=EXTERNAL)]
    assert external.status is Status.SKIPPED
    assert "resets established connections when it marks a server down" in external.message
    assert verdicts[Case.TWENTY_PERCENT.format(lb=INTERNAL)].status is Status.PASSED
    # On gcp, whose LBs keep flows, the same run breaks the rule; but the requests that
    # broke it were sent to an apiserver that had stopped serving, which fails the external
    # LB's routing tests: a failed request is judged by one test, so this one points there.
    [as_gcp], _ = analyze_runs([path], platform="gcp")
    on_gcp = {v.name: v for v in as_gcp.verdicts}
    twenty = on_gcp[Case.TWENTY_PERCENT.format(lb=EXTERNAL)]
    routing = [
        v for v in as_gcp.verdicts
        if v.cause == "stopped-server" and v.key is not None and v.key[0] == EXTERNAL
    ]  # fmt: skip
    assert routing
    assert all(v.status is Status.FAILED for v in routing)
    assert twenty.status is Status.SKIPPED
    assert twenty.message.startswith(broken["text"] + ". Not judged here: its failed requests")
    assert all(f"'{v.name}'" in twenty.message for v in routing)
    # Judged alone, the same finding fails.
    [alone] = judge_ages(as_gcp.summary, PLATFORMS["gcp"], ())[:1]
    assert (alone.status, alone.message) == (Status.FAILED, broken["text"])


def test_the_text_the_html_and_junit_show_it(rollout_log, tmp_path: Path) -> None:
    path, _ = rollout_log
    out = tmp_path / "out"
    assert main(["analyze", str(path), "--out", str(out)]) == 1
    [analysis], _ = analyze_runs([path])
    text = describe(analysis)
    start = text.index(
        "requests by the phase of its server's shutdown in which their connection was opened:"
    )
    header = text[start + 1].split()
    assert header == ["lb", "protocol", "connection", "opened", "late", "failed", "resent"]
    end = next(i for i in range(start, len(text)) if text[i].startswith("opened: "))
    failing = [line for line in text[start:end] if "connect_refused" in line]
    assert len(failing) == sum(
        1 for r in analysis.summary["connection_ages"]["rows"] if r["failed"]
    )
    assert all(line.startswith("external-lb") for line in failing)
    html = (out / "report.html").read_text()
    assert "Connection age: which connections failed" in html
    assert "20 % rule broken" in html
    assert '<span class="skipped">skipped</span> external-lb: 20 % rule broken' in html
    cases = {c.name: c for c in next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))}
    skipped = cases[Case.TWENTY_PERCENT.format(lb=EXTERNAL)].result
    assert [type(r) for r in skipped] == [Skipped]
    assert not cases[Case.TWENTY_PERCENT.format(lb=INTERNAL)].result  # passed


def test_a_log_without_samples_has_the_daemons_table(rollout_log, tmp_path: Path) -> None:
    path, live = rollout_log
    lines = [line for line in _records(path) if '"kind":"sample"' not in line]
    compact = tmp_path / "compact.jsonl"
    compact.write_text("".join(lines))
    [analysis], _ = analyze_runs([compact])
    assert analysis.replay.ages == live.ages
    [full], _ = analyze_runs([path])
    assert analysis.summary["connection_ages"] == full.summary["connection_ages"]


def test_a_daemon_table_the_replay_does_not_give_is_a_warning(
    rollout_log: tuple[Path, LiveOutput], tmp_path: Path
) -> None:
    path, live = rollout_log
    assert live.ages is not None
    changed = dataclasses.replace(live.ages, rows=live.ages.rows[1:])
    ages_line = encode(live.ages) + "\n"
    lines = [encode(changed) + "\n" if line == ages_line else line for line in _records(path)]
    assert lines != _records(path)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines))
    [analysis], _ = analyze_runs([edited])
    assert analysis.warnings == [f"{edited}: the connection-age table differs from the daemon's"]
    assert isinstance(analysis.replay.ages, ConnectionAges)
    assert analysis.replay.ages.rows == live.ages.rows  # the replay's is the one reported


def _records(path: Path) -> list[str]:
    """Every line of the log, its rotated segments first."""
    return [line.decode().rstrip("\n") + "\n" for line in read_lines(path)]


def test_the_record_is_in_the_log_once(rollout_log) -> None:
    path, _ = rollout_log
    kinds = [json.loads(line)["kind"] for line in _records(path)]
    assert kinds.count("connection_ages") == 1
