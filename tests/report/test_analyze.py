"""`prober analyze` on synthetic event logs whose answers are known."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml, Skipped

from prober.cli import main
from prober.core.clientgo import retry_after_detail
from prober.core.durations import parse_go_duration
from prober.core.models import LB, Connection, ErrorClass
from prober.report.analyze import analyze_runs
from prober.report.history.history import load_run_facts
from prober.report.history.thresholds import load_thresholds
from prober.report.schema import types as documents
from prober.report.verdicts.identity import Case
from prober.report.verdicts.run_verdict import WHOLE_RUN
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.history import history_thresholds
from tests.report.rollout import NODES, SWITCH, rollout, streams

ROUTING = (
    "[sig-api-machinery] load-balancer/{} protocol/{} connection/{} "
    "should stop routing to a kube-apiserver before it stops serving"
)
AVAILABLE = (
    "[sig-api-machinery] load-balancer/{} protocol/{} connection/{} "
    "should be available throughout the test"
)


def test_the_summary_holds_the_known_answers(rollout_log) -> None:
    path, _ = rollout_log
    scenario = rollout()
    [analysis], _ = analyze_runs([path])
    summary = analysis.summary
    assert (summary["v"], summary["run_id"], summary["platform"]) == (3, "run-1", "aws")
    assert [(w["host"], w["node"], w["closed_by"]) for w in summary["windows"]] == [
        (sd.host, NODES[sd.host], "recovered") for sd in scenario.shutdowns
    ]
    plans = {p.stream.name: p for p in scenario.plans}
    for window, shutdown in zip(summary["windows"], scenario.shutdowns, strict=True):
        assert window["t0_lo"] <= shutdown.t0 <= window["t0_hi"]
        assert window["t0_hi"] - window["t0_lo"] < 0.1
        assert window["delay"] == 20.0
        for ws in window["streams"]:
            plan = plans[ws["stream"]]
            truth = scenario.true_reaction(plan, shutdown)
            assert truth is not None
            assert abs(ws["reaction"] - truth) <= (window["t0_hi"] - window["t0_lo"]) / 2
            _assert_reaction_bound(ws, truth, plan.switch_after, shutdown.delay)
            assert ws["failures"] == len(scenario.failures(plan, shutdown))
            assert ws["failures"] == (12 if plan.switch_after > shutdown.delay else 0)
    for stream in summary["streams"]:
        plan = plans[stream["stream"]]
        assert stream["samples"] == 800  # 200 s at 4 requests a second, from the summaries
        failing = plan.switch_after > 20.0
        assert stream["disruption_seconds"] == pytest.approx(9.0 if failing else 0.0)
        assert len(stream["intervals"]) == (3 if failing else 0)
        for interval, shutdown in zip(stream["intervals"], scenario.shutdowns, strict=False):
            failed = scenario.failures(plan, shutdown)
            assert interval["start_t"] == failed[0]
            assert interval["samples"] == len(failed)
            assert interval["error"] == "connect_refused"
            # the server stopped, then the LB switched away: the true edges, inside the bounds
            start, end = shutdown.stopped, shutdown.t0 + plan.switch_after
            assert interval["start_lo"] <= start <= interval["start_hi"]
            assert interval["start_lo"] <= interval["start_t"] <= interval["start_hi"]
            assert interval["end_lo"] <= end <= interval["end_hi"]
            assert interval["end_lo"] <= interval["end_t"] <= interval["end_hi"]
    assert len(summary["worst"]) == 8
    for worst in summary["worst"]:
        switch = SWITCH[(LB(worst["lb"]), Connection(worst["connection"]))]
        assert min(switch, 20.0) - 0.3 < worst["reaction"] <= min(switch, 20.0)
        assert worst["disruption_seconds"] == pytest.approx(9.0 if switch > 20 else 0.0)
        # the bound is the one of the window stream whose reaction is the worst
        key = (worst["lb"], worst["protocol"], worst["connection"])
        mine = [
            ws
            for w in summary["windows"]
            for ws in w["streams"]
            if (ws["lb"], ws["protocol"], ws["connection"]) == key
        ]
        first_worst = next(ws for ws in mine if ws["reaction"] == worst["reaction"])
        assert (worst["reaction_lo"], worst["reaction_hi"]) == (
            first_worst["reaction_lo"],
            first_worst["reaction_hi"],
        )


def _assert_reaction_bound(ws: dict, truth: float, switch: float, delay: float) -> None:
    """The measured and the true reaction lie in the bound; so does the LB's switch while
    the server still served; what set hi is named exactly when something did."""
    lo, hi = ws["reaction_lo"], ws["reaction_hi"]
    assert lo <= min(truth, ws["reaction"])
    if hi is None:
        assert ws["bound_by"] is None
        return
    assert max(truth, ws["reaction"]) <= hi
    assert ws["bound_by"] in ("failure", "restarted", "sampling", "closed")
    if switch < delay:
        assert lo <= switch <= hi


def test_json_output_is_the_designs_shape(rollout_log, tmp_path: Path) -> None:
    path, _ = rollout_log
    assert main(["analyze", str(path), "--out", str(tmp_path / "out")]) == 1
    text = (tmp_path / "out" / "summary.json").read_text()
    # Seconds to the microsecond, as the event log has them: no arithmetic noise past that.
    assert re.findall(r"\d\.\d{7,}", text) == []
    doc = json.loads(text)
    assert list(doc) == [
        "v", "run_id", "started", "platform", "windows", "streams", "worst", "watches", "ended",
        "retry_after", "latency", "connection_ages", "coverage", "apiservers", "same_node",
        "restarts", "rebalancing", "own_late", "patterns", "verdicts", "explained", "counts",
    ]  # fmt: skip
    assert doc["retry_after"] == {}  # no answer said Retry-After
    # A prober that knows no node: nothing of it is same-node.
    assert doc["same_node"] == {"node": None, "hairpins": [], "windows": [], "streams": []}
    assert len(doc["verdicts"]) == 51  # every test junit.xml reports
    junit = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    assert doc["counts"] == {
        "tests": int(junit.get("tests")),
        "failed": int(junit.get("failures")),
        "passed": int(junit.get("tests")) - int(junit.get("failures")) - int(junit.get("skipped")),
        "skipped": int(junit.get("skipped")),
        "by_design": 0,
    }
    # one line per LB key, the 20 % rule's per LB, and the add-back's per LB
    assert len(doc["explained"]) == 12
    # The restarted apiserver: each LB took it back, and nothing failed on it early.
    assert [e["lb"] for e in doc["restarts"]["lbs"]] == ["external-lb", "internal-lb"]
    assert [e["early"] for e in doc["restarts"]["lbs"]] == [0, 0]
    assert doc["ended"]["abruptly"] is False
    assert doc["ended"]["reason"] == "stopped"
    assert doc["watches"] == {
        "blind_deadline": None,
        "heartbeat": {"writes": 0, "failed": 0},
        "stall_after": None,
        "streams": [],
    }  # a run without watch streams
    assert list(doc["windows"][0]) == [
        "host",
        "node",
        "delay",
        "t0",
        "t0_lo",
        "t0_hi",
        "closed_by",
        "end_t",
        "streams",
        "instance",
    ]
    assert [w["instance"] for w in doc["windows"]] == ["master-0 #1", "master-1 #1", "master-2 #1"]
    assert list(doc["windows"][0]["streams"][0]) == [
        "stream",
        "lb",
        "protocol",
        "connection",
        "late",
        "max_elapsed",
        "reaction",
        "reaction_lo",
        "reaction_hi",
        "bound_by",
        "failures",
    ]
    assert list(doc["streams"][0]) == [
        "stream",
        "lb",
        "protocol",
        "connection",
        "samples",
        "retried",
        "stopped",
        "same_node",
        "disruption_seconds",
        "felt_disruption_seconds",
        "intervals",
        "pattern_seconds",
    ]
    assert list(doc["worst"][0]) == [
        "lb",
        "protocol",
        "connection",
        "reaction",
        "reaction_lo",
        "reaction_hi",
        "disruption_seconds",
        "felt_disruption_seconds",
    ]
    failing = next(s for s in doc["streams"] if s["intervals"])
    assert list(failing["intervals"][0]) == [
        "start_t",
        "end_t",
        "start_lo",
        "start_hi",
        "end_lo",
        "end_hi",
        "start_ts",
        "end_ts",
        "error",
        "detail",
        "samples",
        "felt",
        "early",
        "cause",
        "pattern",
        "pattern_evidence",
        "pattern_confidence",
    ]
    # The types name exactly what is written: their v2 keys are NotRequired (a v1 summary
    # lacks them), so only this tells that the writer forgot none.
    for entry, shape in [
        (doc, documents.SummaryDocument),
        (doc["windows"][0], documents.WindowEntry),
        (doc["windows"][0]["streams"][0], documents.WindowStreamEntry),
        (doc["streams"][0], documents.StreamEntry),
        (failing["intervals"][0], documents.IntervalEntry),
        (doc["worst"][0], documents.WorstEntry),
        (doc["connection_ages"], documents.ConnectionAgesSection),
        (doc["connection_ages"]["rows"][0], documents.AgeRowEntry),
        (doc["connection_ages"]["findings"][0], documents.AgeFindingEntry),
        (doc["same_node"], documents.SameNodeEntry),
        (doc["coverage"], documents.CoverageSection),
        (doc["coverage"]["streams"][0], documents.CoverageTotalEntry),
        (doc["coverage"]["windows"][0], documents.CoverageWindowEntry),
        (doc["coverage"]["windows"][0]["streams"][0], documents.CoverageStreamEntry),
    ]:
        assert set(entry) == shape.__required_keys__ | shape.__optional_keys__, shape.__name__
    facts = load_run_facts(tmp_path / "out" / "summary.json")
    assert (facts.run_id, facts.platform, facts.windows, len(facts.worst)) == ("run-1", "aws", 3, 8)


def test_junit_verdicts_against_history(rollout_log, tmp_path: Path, capsys) -> None:
    path, _ = rollout_log
    thresholds = history_thresholds(tmp_path)
    out = tmp_path / "out"
    assert main(["analyze", str(path), "--thresholds", str(thresholds), "--out", str(out)]) == 1
    xml = JUnitXml.fromfile(str(out / "junit.xml"))
    suites = list(xml)
    assert len(suites) == 1
    cases = {case.name: case for case in suites[0]}
    # 16 against history, 12 against the LBs' own settings (8 budgets, 4 delay coverages),
    # 2 of the 20 % rule (one per LB), 2 of the add-back edge (one per LB: none routed to an
    # apiserver before it could serve), 2 of the LBs' resets (one per LB), 8 of answer times
    # (one per stream: none slow but up), 8 of the sampling of each window (one per stream),
    # and the run's own: recorded to its stop
    assert len(cases) == 51
    assert suites[0].tests == 51
    budget = cases[Case.WITHIN_BUDGET.format(lb="external-lb", protocol="http1", connection="new")]
    assert not budget.result  # 7.94 s [7.91, 10.93] against the NLB's 30 s
    assert not cases[WHOLE_RUN.name].result  # passed: the log ends with its run_end record

    def outcome(name: str) -> tuple[str, str]:
        result = cases[name].result
        if not result:
            return "passed", ""
        assert len(result) == 1
        kind = "failed" if isinstance(result[0], Failure) else "skipped"
        return kind, result[0].message

    # internal-lb new: 2.8 s against 5 s; reused 11.8 s against 5 s
    assert outcome(ROUTING.format("internal-lb", "http2", "new"))[0] == "passed"
    kind, message = outcome(ROUTING.format("internal-lb", "http1", "reused"))
    assert kind == "failed"
    # the three windows tie to the hundredth: which one is worst is float noise
    found = re.fullmatch(
        r"kube-api-http1-internal-lb-reused-connections: apiserver (apiserver-\w+) "
        r"\(node master-\d\) still got requests 11\.79 s after its /readyz went false "
        r"\((.*); T0 \d+\.99 s ± 0\.03 s = 2026-11-30T10:0\d:\d\d\.990000Z, 48 late; "
        r"report\.html#window-\d\); allowed 5 s \(P99 of 100 aws runs\)",
        message,
    )
    assert found is not None
    summary = json.loads((out / "summary.json").read_text())
    [window] = [w for w in summary["windows"] if w["host"] == found[1]]
    [ws] = [
        ws
        for ws in window["streams"]
        if ws["stream"] == "kube-api-http1-internal-lb-reused-connections"
    ]
    assert found[2] == _within(ws["reaction_lo"], ws["reaction_hi"])
    assert 11.7 < ws["reaction_lo"] <= 11.79
    # the intervals' edges bound the disruption
    [stream] = [
        s
        for s in summary["streams"]
        if s["stream"] == "kube-api-http1-external-lb-reused-connections"
    ]
    lo = math.fsum(i["end_lo"] - i["start_hi"] for i in stream["intervals"])
    hi = math.fsum(i["end_hi"] - i["start_lo"] for i in stream["intervals"])
    assert 0 < lo < 9.0 < hi
    assert outcome(AVAILABLE.format("external-lb", "http1", "reused")) == ("passed", "")
    # Those 9 s were requests sent to an apiserver that had stopped serving: the routing
    # test judges them, and the availability test names them without judging them again.
    assert cases[AVAILABLE.format("external-lb", "http1", "reused")].system_out == (
        "kube-api-http1-external-lb-reused-connections: 0.00 s of disruption a client felt in "
        "0 intervals, besides 9.00 s in 3 intervals that other tests judge (cause "
        "stopped-server x3); allowed 10 s (P99 of 100 aws runs)"
    )
    # external-lb reused: 20 s against 25 s, but 12 requests failed in each window
    kind, message = outcome(ROUTING.format("external-lb", "http2", "reused"))
    assert kind == "failed"
    assert message.startswith(
        "kube-api-http2-external-lb-reused-connections: 12 requests sent to a kube-apiserver "
        "that had stopped serving (cause stopped-server: connect_refused x12), apiserver "
        "apiserver-aaaa (node master-0), T0 at 29.99 s = 2026-11-30T10:00:29.990000Z "
        "(report.html#window-1); pattern lb-readiness (high confidence) x1 (and 2 more)"
    )
    failure_text = cases[ROUTING.format("external-lb", "http2", "reused")].result[0].text
    assert failure_text.count("had stopped serving") == 3
    # availability: 9 s of disruption against 10 s passes, 0 s against 1 s passes
    assert outcome(AVAILABLE.format("external-lb", "http1", "reused"))[0] == "passed"
    assert outcome(AVAILABLE.format("internal-lb", "http1", "new"))[0] == "passed"
    printed = capsys.readouterr().out
    assert f"wrote {out / 'junit.xml'}" in printed
    assert "FAIL " + ROUTING.format("internal-lb", "http1", "reused") in printed


def test_the_printed_table_shows_each_worst_reaction_with_its_bound(tmp_path, capsys) -> None:
    # Cut inside the first window: reused connections are still answered late at the end,
    # so nothing can bound their reaction above.
    samples = [s for s in rollout().samples() if s.end < 40.0]
    log = tmp_path / "events.jsonl"
    write_daemon_log(log, run_record(streams()), samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    start = printed.index(
        "lb           protocol  connection  worst reaction [bound]  within budget  "
        "before it stops  disruption  available"
    )
    rows = [re.split(r"\s{2,}", line) for line in printed[start + 2 : start + 10]]
    assert printed[start + 10 : start + 12] == [
        "[bound]: where the true reaction lies, given the sampling; ? = not bounded",
        "within budget, before it stops, available: the outcomes of those tests, named in full "
        "in junit.xml",
    ]
    for row, worst in zip(rows, summary["worst"], strict=True):
        assert row[:3] == [worst["lb"], worst["protocol"], worst["connection"]]
        hi = "?" if worst["reaction_hi"] is None else f"{worst['reaction_hi']:.2f}"
        assert row[3] == f"{worst['reaction']:.2f} s [{worst['reaction_lo']:.2f}, {hi}]"
        if worst["connection"] == "reused":
            assert row[3].endswith(", ?]")
    assert rows[1][3] == "9.79 s [9.76, ?]"  # internal-lb http1 reused: T0 29.99 s ± 0.03 s
    # Each outcome column is its test's outcome in junit.xml, not another test's.
    cases = {
        c.get("name"): "failed" if c.find("failure") is not None
        else "skipped" if c.find("skipped") is not None else "passed"
        for c in ET.parse(tmp_path / "out" / "junit.xml").iter("testcase")
    }  # fmt: skip
    for row in rows:
        key = row[:3]
        budget = Case.WITHIN_BUDGET.format(lb=key[0], protocol=key[1], connection=key[2])
        names = [budget, ROUTING.format(*key), AVAILABLE.format(*key)]
        assert [row[4], row[5], row[7]] == [cases[n] for n in names]


def _within(lo: float, hi: float | None) -> str:
    if hi is None:
        return f"true value at least {lo:.2f} s given the sampling, which sets no upper bound"
    return f"true value within [{lo:.2f}, {hi:.2f}] s given the sampling"


def test_without_history_verdicts_are_skipped_with_the_reason(rollout_log, tmp_path) -> None:
    path, _ = rollout_log
    thresholds = history_thresholds(tmp_path, platform="gcp")
    out = tmp_path / "out"
    code = main(["analyze", str(path), "--thresholds", str(thresholds), "--out", str(out)])
    assert code == 1  # requests failed inside windows: that needs no history
    cases = {c.name: c for c in next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))}
    skipped = cases[ROUTING.format("internal-lb", "http1", "new")].result[0]
    assert isinstance(skipped, Skipped)
    assert skipped.message == (
        "no usable history for aws internal-lb/http1/new reaction: no aws history; "
        "no pooled history"
    )
    available = cases[AVAILABLE.format("internal-lb", "http1", "new")].result[0]
    assert isinstance(available, Skipped)


def test_another_platforms_history_only_is_one_warning_and_skips(tmp_path, capsys) -> None:
    internal = [s for s in streams() if s.lb is LB.INTERNAL]
    names = {s.name for s in internal}
    samples = [s for s in rollout().samples() if s.stream in names]
    log = tmp_path / "events.jsonl"
    write_daemon_log(log, run_record(internal), samples, nodes=NODES)
    thresholds = history_thresholds(tmp_path, platform="gcp")
    out = tmp_path / "out"
    assert main(["analyze", str(log), "--thresholds", str(thresholds), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: {thresholds}: no history for platform 'aws' (it has gcp): verdicts that "
        "need it are skipped"
    ]
    suite = next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))
    # the whole run passed; the LBs' own settings judge 4 budgets and 2 delay coverages; the
    # internal LB's 20 % rule held; it took the restarted apiservers back, none early; it
    # reset no connection; none of its 4 streams was slow but up
    assert (suite.tests, suite.skipped, suite.failures) == (22, 8, 0)


def test_a_platform_flag_overrides_the_run_records(rollout_log, tmp_path) -> None:
    path, _ = rollout_log
    thresholds = load_thresholds(history_thresholds(tmp_path, platform="gcp"))
    [analysis], _ = analyze_runs([path], platform="gcp", thresholds=thresholds)
    assert analysis.summary["platform"] == "gcp"
    assert not analysis.warnings


def test_several_runs_write_one_directory_each(tmp_path: Path, rollout_samples, capsys) -> None:
    (tmp_path / "logs").mkdir()
    for run_id in ("ci/run 1", "ci/run 2"):
        name = run_id[-1] + ".jsonl"
        write_daemon_log(
            tmp_path / "logs" / name, run_record(streams(), run_id=run_id), rollout_samples[:400]
        )
    out = tmp_path / "deep" / "out"  # two levels that do not exist yet
    assert main(["analyze", str(tmp_path / "logs"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["ci_run_1", "ci_run_2"]
    assert (out / "ci_run_1" / "report.html").is_file()
    assert capsys.readouterr().out.count("wrote ") == 6


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "empty event log (no records)"),
        ('{"v":2,"kind":"run"}\n', "1: schema version 2, this reader knows 1"),
        ("{not json\n" + '{"v":1}\n', "1: not JSON"),
    ],
)
def test_bad_logs_exit_2_with_one_line(tmp_path: Path, capsys, content: str, problem: str):
    log = tmp_path / "events.jsonl"
    log.write_text(content)
    assert main(["analyze", str(log), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith(f"prober analyze: {log}")
    assert problem in line


def test_bad_thresholds_file_exits_2(rollout_log, tmp_path: Path, capsys) -> None:
    path, _ = rollout_log
    bad = tmp_path / "thresholds.json"
    bad.write_text('{"v": 1, "entries": [{"platform": "aws", "lb": "nlb"}]}')
    assert main(["analyze", str(path), "--thresholds", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"prober analyze: {bad}: entries[0]: 'nlb' is not a valid LB\n"
    )


def test_help_has_an_example(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "--help"])
    assert exited.value.code == 0
    assert "prober analyze /var/log/prober/events.jsonl --thresholds" in capsys.readouterr().out


def test_skipped_lines_are_counted_and_reported(rollout_log, tmp_path: Path, capsys) -> None:
    path, _ = rollout_log
    text = path.read_text()
    path.write_text(text + '{"v":1,"kind":"gossip","about":"a newer writer"}\n' + text[:40])
    assert main(["analyze", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("note: skipped 2 of ")
    assert err[0].endswith("(1 of unknown kinds, 1 truncated)")
    html = (tmp_path / "out" / "report.html").read_text()
    assert "event-log lines were skipped (1 of unknown kinds, 1 truncated)" in html


def test_thresholds_help_has_an_example(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["thresholds", "--help"])
    out = capsys.readouterr().out
    assert "prober thresholds history/ -o thresholds.json --out dashboard/" in out
    assert "prober thresholds --check thresholds.json last-10-runs/" in out


def test_requests_sent_again_are_counted_and_are_no_disruption(tmp_path, capsys) -> None:
    """A request resent as Go's transport would (`retried`) is in the log, in summary.json
    per stream and reason, and in the printed report; answered the second time, it opens no
    disruption interval."""
    samples = [s for s in rollout().samples() if s.end < 20.0]
    first, second = samples[3], next(s for s in samples if s.stream != samples[3].stream)
    resent = {first.audit_id: "goaway", second.audit_id: "closed_idle"}
    samples = [
        dataclasses.replace(s, retried=resent[s.audit_id]) if s.audit_id in resent else s
        for s in samples
    ]
    log = tmp_path / "events.jsonl"
    write_daemon_log(log, run_record(streams()), samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    counted = {s["stream"]: s["retried"] for s in summary["streams"] if s["retried"]}
    assert counted == {first.stream: {"goaway": 1}, second.stream: {"closed_idle": 1}}
    assert "sent again once on a new connection, as Go's transport would: 2" in printed
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"{first.stream}: 1 requests sent again once on a new connection" in html
    assert all(not s["intervals"] for s in summary["streams"] if s["stream"] in counted)


def test_requests_cut_by_the_stop_are_counted_and_are_no_disruption(tmp_path, capsys) -> None:
    """The daemon stopped inside a window with requests held open past its grace: those are
    samples of class `stopped`, in summary.json per stream and in the printed report, and
    they change no interval, no window and no verdict of the run without them."""
    samples = [s for s in rollout().samples() if s.end < 100.0]
    last = {s.stream: s for s in samples}
    cut = [
        dataclasses.replace(
            s,
            t=s.t + 0.5,
            dur=2.0,
            audit_id=s.audit_id[:-4] + "cccc",
            status=None,
            http_version=None,
            shutdown=None,
            error=ErrorClass.STOPPED,
            detail="cut by the daemon's stop: sent, no answer yet",
            phases={"sent": 0.0},
        )
        for s in last.values()
    ]
    out, codes, junit = {}, {}, {}
    for name, feed in (("plain", samples), ("cut", samples + cut)):
        log = tmp_path / f"{name}.jsonl"
        write_daemon_log(log, run_record(streams()), feed, nodes=NODES, end_t=103.0)
        codes[name] = main(["analyze", str(log), "--out", str(tmp_path / name)])
        out[name] = json.loads((tmp_path / name / "summary.json").read_text())
        junit[name] = (tmp_path / name / "junit.xml").read_text()
    printed = capsys.readouterr().out
    assert codes["cut"] == codes["plain"]  # the same verdicts: a stopped request fails none
    assert junit["cut"] == junit["plain"]
    assert {s["stream"]: s["stopped"] for s in out["cut"]["streams"]} == dict.fromkeys(last, 1)
    assert f"cut by the daemon's stop, past its grace: {len(cut)} requests" in printed
    for key in ("windows", "worst"):
        assert out["cut"][key] == out["plain"][key]
    plain = {s["stream"]: s for s in out["plain"]["streams"]}
    for stream in out["cut"]["streams"]:
        before = plain[stream["stream"]]
        assert stream["samples"] == before["samples"] + 1
        assert (stream["intervals"], stream["disruption_seconds"]) == (
            before["intervals"],
            before["disruption_seconds"],
        )


def test_answers_with_retry_after_are_raw_disruption_and_followed_as_client_go_would(
    tmp_path,
) -> None:
    """A 429 with `Retry-After: 1` on a new connection: the raw figure counts it, as origin
    does; summary.json says client-go's retry would have succeeded on the stand-in, the
    first sample of the same LB and protocol on a new connection one second later, which
    the compacted log kept for it."""
    samples = [s for s in rollout().samples() if s.end < 20.0]
    new = [s for s in samples if s.stream_id.connection is Connection.NEW and s.t > 5.0]
    told = new[0]
    answer = dataclasses.replace(
        told, status=429, error=ErrorClass.RETRY_AFTER, shutdown=None,
        detail=retry_after_detail(429, "1"),
    )  # fmt: skip
    samples = [answer if s is told else s for s in samples]
    stand_in = min(
        (s for s in samples if s.stream == told.stream and s.t >= told.t + 1.0), key=lambda s: s.t
    )
    log = tmp_path / "events.jsonl"
    write_daemon_log(log, run_record(streams()), samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(tmp_path / "out")]) in (0, 1)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["retry_after"][told.stream]) == documents.RetryAfterEntry.__required_keys__
    assert summary["retry_after"] == {
        told.stream: {
            "answers": 1,
            "succeeded": 1,
            "felt": 0,
            "unresolved": 0,
            "max_waited": pytest.approx(stand_in.end - told.t),
            "felt_disruption_seconds": 0.0,  # what the client felt: a wait, no failure
        }
    }
    (stream,) = [s for s in summary["streams"] if s["stream"] == told.stream]
    assert stream["disruption_seconds"] > 0  # the raw figure, as origin counts it
    assert [i["error"] for i in stream["intervals"]] == ["retry_after"]
    assert stream["felt_disruption_seconds"] == 0.0
    assert [i["felt"] for i in stream["intervals"]] == [False]
    # OpenShift CI's files: the raw figure stays the one ci-tools sums; the felt one rides
    # beside it in the warehouse rows and the interval's annotations.
    origin = tmp_path / "origin"
    assert main(["origin", str(tmp_path / "out" / "summary.json"), "--out", str(origin)]) == 0
    [backend] = origin.glob("backend-disruption_*.json")
    entry = json.loads(backend.read_text())["BackendDisruptions"]["prober-" + told.stream]
    assert parse_go_duration(entry["DisruptedDuration"]) == pytest.approx(
        stream["disruption_seconds"]
    )
    [timeline] = origin.glob("e2e-timelines_*.json")
    backend_name = "prober-" + told.stream
    items = json.loads(timeline.read_text())["items"]
    [item] = [
        i for i in items if i["locator"]["keys"].get("backend-disruption-name") == backend_name
    ]
    assert item["message"]["annotations"]["client-felt"] == "false"
    assert "client-go's retries of every answer got through" in item["message"]["humanMessage"]
    rows = {r["row_type"]: r for f in origin.glob("*-autodl.json")
            for r in json.loads(f.read_text())["rows"] if r["stream"] == told.stream}  # fmt: skip
    assert rows["stream"]["felt_disruption_seconds"] == "0.0"
    assert rows["interval"]["felt"] == "false"


def test_retries_that_fail_are_felt_disruption(tmp_path) -> None:
    """The stand-in for the retry is refused: the client felt it, and the felt figure keeps
    the interval of the answer with Retry-After."""
    samples = [s for s in rollout().samples() if s.end < 20.0]
    new = [s for s in samples if s.stream_id.connection is Connection.NEW and s.t > 5.0]
    told = new[0]
    stand_in = min((s for s in new if s.stream == told.stream and s.t >= told.t + 1.0),
                   key=lambda s: s.t)  # fmt: skip
    changed = {
        told.audit_id: dataclasses.replace(
            told, status=503, error=ErrorClass.RETRY_AFTER, shutdown=None,
            detail=retry_after_detail(503, "1"),
        ),
        stand_in.audit_id: dataclasses.replace(
            stand_in, status=None, error=ErrorClass.CONNECT_REFUSED, shutdown=None,
            http_version=None, detail="refused",
        ),
    }  # fmt: skip
    samples = [changed.get(s.audit_id, s) for s in samples]
    log = tmp_path / "events.jsonl"
    write_daemon_log(log, run_record(streams()), samples, nodes=NODES)
    assert main(["analyze", str(log), "--out", str(tmp_path / "out")]) in (0, 1)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    entry = summary["retry_after"][told.stream]
    assert (entry["succeeded"], entry["felt"], entry["unresolved"]) == (0, 1, 0)
    (stream,) = [s for s in summary["streams"] if s["stream"] == told.stream]
    assert entry["felt_disruption_seconds"] == pytest.approx(stream["disruption_seconds"])
    assert entry["felt_disruption_seconds"] > 0
