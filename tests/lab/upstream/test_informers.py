"""client-go's informer lines as the daemon's watch records, and the two side by side through one
tracker: a relist, a 410, a blind spell that a dead flow made on each."""

from __future__ import annotations

import json

import pytest

from prober.core.models import LB, Protocol
from prober.core.streamkind import KindStreamId
from prober.core.watch import WATCH, Heartbeat, WatchAttempt, WatchEnd, WatchSeen
from prober.lab.judges.informers import differences, informer_records, longest, sides
from prober.lab.scenarios.informers import Informer, health_env

OFFSET = 1000.0
INFORMER = Informer(LB.INTERNAL, Protocol.HTTP1, "list")
DAEMON = KindStreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, WATCH)


def line(event: str, t: float, **fields: object) -> str:
    return json.dumps({"event": event, "wall": OFFSET + t, **fields})


def writes(until: float) -> list[Heartbeat]:
    """The daemon's heartbeat: revision n written at n seconds, acknowledged 0.1 s later."""
    return [Heartbeat(float(n), n + 0.1, n, blind_after=2.0) for n in range(1, int(until))]


def informer_lines(seen_until: int, then: int) -> list[str]:
    """A LIST, a watch that sees every write to `seen_until`, is cut by the server, a relist
    after a 410, and a watch that sees the writes from `then` on."""
    out = [line("list", 0.5, relist=False, error=None),
           line("watch_start", 0.6, watch_id=1, relist=False, initial_list=False, error=None,
                duration_s=0.01)]  # fmt: skip
    out += [line("watch_event", n + 0.2, watch_id=1, type="MODIFIED", rv=str(n))
            for n in range(1, seen_until + 1)]  # fmt: skip
    out += [line("watch_event", then - 1.0, watch_id=1, type="ERROR", rv="",
                 status={"code": 410}),
            line("watch_end", then - 1.0, watch_id=1, cause="closed_by_server", events=5,
                 error_status={"code": 410}),
            line("list", then - 0.5, relist=True, error=None),
            line("watch_start", then - 0.4, watch_id=2, relist=False, initial_list=False,
                 error=None, duration_s=0.01)]  # fmt: skip
    out += [line("watch_event", n + 0.2, watch_id=2, type="MODIFIED", rv=str(n))
            for n in range(then - 1, 40)]  # fmt: skip
    return [*out, "klog on stdout is no record"]


def test_an_informers_lines_are_the_daemons_records_on_its_clock() -> None:
    records = informer_records(informer_lines(5, 20), INFORMER, OFFSET)
    kinds = [type(r).__name__ for r in records]
    assert kinds[:3] == ["WatchAttempt", "WatchAttempt", "WatchSeen"]
    (end,) = [r for r in records if isinstance(r, WatchEnd)]
    assert (end.how, end.t, end.started) == ("gone", 19.0, pytest.approx(0.6))
    lists = [r for r in records if isinstance(r, WatchAttempt) and r.step == "list"]
    assert [r.relist_cause for r in lists] == ["", "relist"]
    seen = [r for r in records if isinstance(r, WatchSeen)]
    assert seen[0].t == pytest.approx(1.2)
    assert seen[0].revision == 1


def test_watch_list_counts_its_initial_sync_as_a_list() -> None:
    lines = [line("watch_start", 1.0, watch_id=1, relist=True, initial_list=True, error=None,
                  duration_s=0.2)]  # fmt: skip
    (listed, watched) = informer_records(lines, Informer(LB.LOCALHOST, Protocol.HTTP2,
                                                         "watch-list"), OFFSET)  # fmt: skip
    assert isinstance(listed, WatchAttempt)
    assert listed.step == "list"
    assert listed.relist_cause == "relist"
    assert isinstance(watched, WatchAttempt)
    assert watched.step == "watch"


def test_the_daemon_and_an_informer_through_one_tracker() -> None:
    heartbeat = writes(40)
    # The daemon saw every write; client-go's informer was deaf from write 6 to its 410.
    daemon = [WatchAttempt(0.5, DAEMON, "list", "ok"), WatchAttempt(0.6, DAEMON, "watch", "ok"),
              *[WatchSeen(n + 0.2, DAEMON, n) for n in range(1, 40)]]  # fmt: skip
    records = sorted([*heartbeat, *daemon], key=lambda r: r.t)
    informer = informer_records(informer_lines(5, 20), INFORMER, OFFSET)
    found = sides(records, {INFORMER: informer}, 40.0)
    assert [s.who for s in found] == ["daemon (list first)", "informer list"]
    ours, theirs = (s.result for s in found)
    assert ours.blind_seconds == 0.0
    # write 6 was acknowledged at 6.1: blind from 8.1 until write 19 arrived at 19.2
    assert longest(theirs) == pytest.approx(19.2 - 8.1)
    assert (theirs.ends["gone"], theirs.relists["relist"]) == (1, 1)
    said = differences(found)
    assert len(said) == 2
    assert "blind at the longest 0.00 s as the daemon measured, 11.10 s" in said[0]
    assert "a 410 met by one of the daemon (0) and client-go's informer (1) only" in said[1]


def test_client_gos_health_check_takes_the_runs_scale_in_whole_seconds() -> None:
    assert health_env(0.2) == {"HTTP2_READ_IDLE_TIMEOUT_SECONDS": "6",
                               "HTTP2_PING_TIMEOUT_SECONDS": "3"}  # fmt: skip
    assert health_env(0.01)["HTTP2_PING_TIMEOUT_SECONDS"] == "1"
