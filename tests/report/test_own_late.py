"""The prober's own connections opened in a delay's last 20 % (`results.own_late`): table
tests, and the recorded golden run held against its apiservers' own audit logs."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from prober.core.models import LB, ClosedBy, Connection, Protocol, StreamId, Window
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from prober.report.results.own_late import connections, own_late_section, window_entry
from tests.factories import sample

FRESH = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.NEW)
KEPT = StreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, Connection.REUSED)
# T0 at 10 s (bounded within 0.1 s), delay 10 s: the last 20 % is 18..20 s.
WINDOW = Window("a", "master-0", 10.0, 10.0, 10.0, 9.95, 10.05, ClosedBy.RECOVERED, 25.0, ())
FIXTURE = Path(__file__).parents[1] / "golden" / "fixture"


def on(t: float, age: float, port: int, *, host: str | None = "a", stream=FRESH, **kw):
    late = host == "a" and t >= 10.0
    made = sample(t, stream=stream, host=host, late=late, delay=10.0, **kw)
    return dataclasses.replace(made, connection_age=age, local_port=port)


@pytest.mark.parametrize(
    ("case", "samples", "counts"),
    [
        ("a fresh connection in the last 20 %", [on(18.5, 0.0, 1)], (1, 1, 0, 0)),
        ("opened before the mark", [on(17.0, 0.0, 1)], (0, 0, 0, 0)),
        ("opened near the mark: maybe", [on(17.98, 0.0, 1)], (0, 0, 1, 1)),
        ("opened past the delay", [on(20.5, 0.0, 1)], (0, 0, 0, 0)),
        ("another server answered", [on(18.5, 0.0, 1, host="b")], (0, 0, 0, 0)),
        ("a kept one: every request on it, answered or not",
         [on(18.5, 0.0, 1, stream=KEPT), on(19.0, 0.5, 1, stream=KEPT),
          on(20.5, 2.0, 1, stream=KEPT, host=None)], (1, 3, 0, 0)),
        ("a kept one opened early is not late", [on(19.0, 5.0, 1, stream=KEPT)], (0, 0, 0, 0)),
        ("a port taken again is another connection",
         [on(18.5, 0.0, 1, stream=KEPT), on(19.5, 0.0, 1, stream=KEPT)], (2, 2, 0, 0)),
        ("after the window's end: not its", [on(18.5, 0.0, 1, stream=KEPT),
         on(26.0, 7.5, 1, stream=KEPT, host=None)], (1, 1, 0, 0)),
    ],
)  # fmt: skip
def test_late_connections_of_a_window(case, samples, counts):
    entry = window_entry(WINDOW, connections(samples), exact_delay=10.0)
    got = (entry["connections"], entry["requests"], entry["maybe_connections"],
           entry["maybe_requests"])  # fmt: skip
    assert got == counts, case


def test_a_run_without_shutdowns_has_no_section():
    assert own_late_section([on(18.5, 0.0, 1)], [], None) is None


def test_the_text_says_how_many():
    entry = window_entry(WINDOW, connections([on(18.5, 0.0, 1), on(17.98, 0.0, 2)]), 10.0)
    assert entry["text"] == (
        "master-0 (T0 10.00 s): the prober opened 1 connection to it in the delay's last 20 % "
        "and sent 1 request on them; 1 connection more, 1 request, opened too near the 80 % "
        "mark or the delay's end to tell"
    )


def test_the_recorded_run_counts_what_its_apiservers_audited_as_late_connections():
    """Each apiserver annotates a request on a connection it accepted past 80 % of its delay
    (`openshift.io/during-graceful`): of the prober's request streams, exactly those the
    section counts. (The /readyz requests on localhost are audited too: they are no stream's
    samples.)"""
    [log], _ = load_runs([FIXTURE / "events.jsonl.gz"])
    result = replay(log)
    settings = log.run.lb_settings
    section = own_late_section(log.samples, result.windows, settings and settings.shutdown_delay)
    assert section is not None
    measured = Counter[tuple[str, str]]()
    for window in section["windows"]:
        assert window["maybe_connections"] == 0  # the golden run places every one
        for stream in window["streams"]:
            measured[(window["node"] or "", stream["stream"])] += stream["requests"]
    assert measured == audited_late_requests(FIXTURE / "audit")
    assert section["requests"] == sum(measured.values()) > 0


def audited_late_requests(root: Path) -> Counter[tuple[str, str]]:
    counts = Counter[tuple[str, str]]()
    for path in sorted(root.glob("*/audit.log")):
        with gzip.open(path, "rt") as lines:
            for line in lines:
                event = json.loads(line)
                agent = event.get("userAgent") or ""
                if "openshift.io/during-graceful" not in event.get("annotations", {}):
                    continue
                if agent.startswith("prober/") and event.get("requestURI") != "/readyz":
                    counts[(path.parent.name, agent.split(" ", 1)[1])] += 1
    return counts
