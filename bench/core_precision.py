"""How precisely the core measures an LB's reaction time, against the incumbent's method, and
what adaptive sampling costs in precision and saves in requests.

openshift/origin reports, per LB, the largest `elapsed` any late request carried: whole seconds,
sampled once a second. The core intersects every sample's timing constraint to place T0 and
reports `last_late_t - t0`. Both are run here on the same synthetic shutdowns with a known T0
and known LB switch times; the figure is the ratio of their p99 absolute errors.

Adaptive sampling (`core.pace`): the streams sample every `QUIET` seconds until the first late
answer ends, then every 50 ms. The same synthetic shutdowns are measured under that schedule
(reaction and T0 errors against the fixed 50 ms rate), and a simulated 2-hour CI run with 3
rollouts of 3 apiservers at a platform's real shutdown delay counts the requests of each
schedule, with the real `PaceTracker` deciding the pace from the simulated answers.

    .venv/bin/python bench/core_precision.py [--runs N] [--platform aws]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataclasses
import heapq
from dataclasses import dataclass

from prober.core.disruption import DisruptionTracker
from prober.core.models import LB, Connection, ErrorClass, Pace, StreamId, Window
from prober.core.pace import PaceTracker
from prober.core.shutdown import ShutdownTracker, WindowOpened
from prober.core.stats import percentile_cont
from tests.factories import sample
from tests.support.synthetic import HOST, OTHER_HOST, StreamPlan, go_rounded, make_run, stream_ids

QUIET, WINDOW_GAP, STREAMS = 1.0, 0.05, 16
DELAYS = {"aws": (129.0, 194.0), "gcp": (95.0, 160.0), "default": (70.0, 135.0)}


def measure(rng: random.Random, gap: float, streams: int) -> tuple[list[float], list[float]]:
    """Absolute reaction errors (ours, incumbent's) over the streams of one shutdown."""
    plans = [
        StreamPlan(s, gap, rng.uniform(0, gap), rng.uniform(1.0, 30.0)) for s in stream_ids(streams)
    ]
    run = make_run(rng, rng.uniform(10, 20), plans, max_dur=0.02)
    tracker = ShutdownTracker()
    windows = [w for s in run.samples for w in tracker.feed(s) if isinstance(w, Window)]
    windows += tracker.close(run.end)
    (window,) = windows
    ours, theirs = [], []
    truth = {p.stream.name: p.switch_after for p in plans}
    for ws in window.streams:
        if ws.reaction is None or ws.max_elapsed is None:
            continue
        ours.append(abs(ws.reaction - truth[ws.stream]))
        theirs.append(abs(ws.max_elapsed - truth[ws.stream]))
    assert window.host == HOST
    return ours, theirs


def adaptive_errors(rng: random.Random) -> tuple[list[float], list[float]]:
    """Reaction and T0 errors of one shutdown sampled quiet, then at the window rate from the
    end of the first late answer on (each stream's next request within a window gap)."""
    t0 = rng.uniform(10, 20)
    plans = [(s, rng.uniform(1.0, 30.0), rng.uniform(0, QUIET)) for s in stream_ids(STREAMS)]

    def answer(stream, t: float, switch: float):
        dur = rng.uniform(0.0005, 0.02)
        served = t + rng.uniform(0.0, dur)
        if t < t0 + switch and served >= t0:
            return sample(t, stream=stream, dur=dur, host=HOST, late=True,
                          elapsed=go_rounded(served - t0))  # fmt: skip
        return sample(t, stream=stream, dur=dur, host=HOST if t < t0 + switch else OTHER_HOST)

    quiet = [answer(st, t, sw) for st, sw, ph in plans for t in _ticks(ph, t0 + 5, QUIET, rng)]
    engaged = min(s.end for s in quiet if s.late)
    samples = [s for s in quiet if s.t < engaged]
    for stream, switch, _ in plans:
        first = engaged + rng.uniform(0, WINDOW_GAP)
        samples += [answer(stream, t, switch) for t in _ticks(first, t0 + 40, WINDOW_GAP, rng)]
    samples.sort(key=lambda s: s.end)
    tracker = ShutdownTracker()
    windows = [w for s in samples for w in tracker.feed(s) if isinstance(w, Window)]
    (window,) = windows + tracker.close(t0 + 40)
    truth = {st.name: sw for st, sw, _ in plans}
    errors = [abs(ws.reaction - truth[ws.stream]) for ws in window.streams if ws.reaction]
    return errors, [abs(window.t0 - t0)]


def _ticks(start: float, end: float, gap: float, rng: random.Random) -> list[float]:
    """Send times from `start`, gaps uniform in [0.5, 1.5] x `gap` as the scheduler draws."""
    out, t = [], start
    while t < end:
        out.append(t)
        t += gap * rng.uniform(0.5, 1.5)
    return out


@dataclass
class SimStream:
    """One stream of the simulated CI run: which LB, whether its connections are kept."""

    stream: StreamId
    reaction: float  # how long after T0 its LB still routes new connections to the server
    localhost: bool = False  # reaches master-0 only, until it stops listening
    resets: bool = False  # the LB resets kept connections when it drops a server (AWS)
    pinned: bool = False  # kept connection on the shutting-down server (decided at each T0)


def sim_streams(rng: random.Random, delay: float) -> list[SimStream]:
    out = []
    for stream in stream_ids(STREAMS):
        if stream.lb is LB.LOCALHOST:
            out.append(SimStream(stream, delay, localhost=True))
        elif stream.lb is LB.SERVICE_NETWORK:
            out.append(SimStream(stream, rng.uniform(1.0, 3.0)))
        else:
            out.append(SimStream(stream, rng.uniform(10.0, 30.0), resets=True))
    return out


def requests_in_a_ci_run(rng: random.Random, delay: float, termination: float) -> tuple[int, int]:
    """Requests of the fixed and the adaptive schedule over 2 hours with 3 rollouts of 3
    apiservers, each shutdown starting a minute after the previous server is back. New
    connections reach the shutting-down server one in three until its LB drops it; a kept
    connection on it (one in three) until the server closes it at the end of the delay;
    localhost reaches master-0 alone. The real trackers and `PaceTracker` decide each
    stream's pace from the simulated answers."""
    duration = 7200.0
    shutdowns = [start + n * (termination + 60.0) for start in (1200.0, 3600.0, 6000.0)
                 for n in range(3)]  # fmt: skip
    streams = sim_streams(rng, delay)
    shutdown, disruption, pace = ShutdownTracker(), DisruptionTracker(), PaceTracker()
    for sim in streams:
        shutdown.add_stream(sim.stream)
    released: set[str] = set()
    queue = [(rng.uniform(0, QUIET), index) for index in range(STREAMS)]
    adaptive, current = 0, -1
    while queue:
        t, index = heapq.heappop(queue)
        if t > duration:
            continue
        adaptive += 1
        which = max((n for n, s in enumerate(shutdowns) if s <= t), default=-1)
        if which != current:  # a new shutdown: where the kept connections are
            current = which
            for sim in streams:
                sim.pinned = rng.random() < 1 / 3
        t0 = shutdowns[which] if which >= 0 else -1e9
        answer = sim_answer(streams[index], t, t0, which % 3 == 0, (delay, termination))
        events = [*disruption.feed(answer), *shutdown.feed(answer)]
        changes = pace.feed(
            answer, windows_open=bool(shutdown.open_hosts),
            opened=any(isinstance(e, WindowOpened) for e in events),
            settled=shutdown.settled(answer.stream), disrupted=disruption.is_open(answer.stream),
        )  # fmt: skip
        for change in changes:
            if change.stream is None:
                released.clear()
                if change.pace is Pace.WINDOW:  # every stream wakes
                    queue = [(min(q, t + rng.uniform(0, WINDOW_GAP)), i) for q, i in queue]
                    heapq.heapify(queue)
            elif change.pace is Pace.QUIET:
                released.add(change.stream)
            else:
                released.discard(change.stream)
        name = streams[index].stream.name
        fast = pace.pace is Pace.WINDOW and name not in released
        gap = WINDOW_GAP if fast else QUIET
        heapq.heappush(queue, (t + gap * rng.uniform(0.5, 1.5), index))
    return round(duration * STREAMS / WINDOW_GAP), adaptive


def sim_answer(sim: SimStream, t: float, t0: float, master0: bool, platform: tuple[float, float]):
    """One answer of the simulated run. The server serves until the end of its delay, then
    refuses; it is back (`shutdown=false`) `termination` + 10 s after T0. An LB that resets
    kept connections (`SimStream.resets`) does so when it drops the server."""
    delay, termination = platform
    reused = sim.stream.connection is Connection.REUSED
    down = t0 <= t < t0 + termination + 10
    if sim.localhost:
        on_server = master0 and down
    elif reused:
        on_server = down and sim.pinned and t < t0 + (sim.reaction if sim.resets else delay)
    else:
        on_server = down and t < t0 + sim.reaction and random.random() < 1 / 3
    if on_server and t >= t0 + delay:
        return sample(t, stream=sim.stream, error=ErrorClass.CONNECT_REFUSED, dur=0.001)
    shown = sample(t, stream=sim.stream, host=HOST if on_server else OTHER_HOST, late=on_server,
                   elapsed=go_rounded(t - t0) if on_server else 0.0)  # fmt: skip
    return dataclasses.replace(shown, reused=reused and not on_server)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--platform", choices=sorted(DELAYS), default="aws")
    args = parser.parse_args()
    rng = random.Random(20261130)
    random.seed(20261201)  # the simulated LBs' choices
    ours, same_rate, incumbent = [], [], []
    for _ in range(args.runs):
        a, b = measure(rng, gap=0.05, streams=16)  # prober defaults: 100 ms, 2 workers
        ours += a
        same_rate += b
        incumbent += measure(rng, gap=1.0, streams=16)[1]  # origin: 1 request per second
    rows = [
        ("prober (t0 from all constraints), 50 ms gap", ours),
        ("max elapsed (incumbent's method), 50 ms gap", same_rate),
        ("max elapsed (incumbent's method), 1 s gap", incumbent),
    ]
    print(f"{'method':48} {'n':>6} {'p50 err':>9} {'p99 err':>9} {'max err':>9}")
    for name, errors in rows:
        p50, p99 = percentile_cont(errors, 0.5), percentile_cont(errors, 0.99)
        print(f"{name:48} {len(errors):6d} {p50:9.3f} {p99:9.3f} {max(errors):9.3f}")
    ratio = percentile_cont(incumbent, 0.99) / percentile_cont(ours, 0.99)
    print(f"p99 reaction error: incumbent / prober = {ratio:.1f}x")
    adaptive_rows(rng, args.runs, ours, args.platform)
    return 0


def adaptive_rows(rng: random.Random, runs: int, fixed: list[float], name: str) -> None:
    delay, term = DELAYS[name]
    reactions, t0s, fixed_t0 = [], [], []
    for _ in range(runs):
        errors, t0_errors = adaptive_errors(rng)
        reactions += errors
        t0s += t0_errors
        fixed_t0.append(fixed_t0_error(rng))
    print()
    print(f"adaptive sampling: quiet {QUIET:g} s, window {WINDOW_GAP * 1000:.0f} ms per stream")
    print(f"{'':48} {'n':>6} {'p50 err':>9} {'p99 err':>9} {'max err':>9}")
    for label, errors in (
        ("reaction, fixed 50 ms", fixed),
        ("reaction, adaptive", reactions),
        ("T0, fixed 50 ms", fixed_t0),
        ("T0, adaptive", t0s),
    ):
        p50, p99 = percentile_cont(errors, 0.5), percentile_cont(errors, 0.99)
        print(f"{label:48} {len(errors):6d} {p50:9.3f} {p99:9.3f} {max(errors):9.3f}")
    fixed_n, adaptive_n = requests_in_a_ci_run(rng, delay, term)
    print(f"requests in 2 h with 3 rollouts on {name} (delay {delay:g} s): fixed {fixed_n}, "
          f"adaptive {adaptive_n}: {fixed_n / adaptive_n:.1f}x fewer")  # fmt: skip


def fixed_t0_error(rng: random.Random) -> float:
    plans = [StreamPlan(s, WINDOW_GAP, rng.uniform(0, WINDOW_GAP), rng.uniform(1.0, 30.0))
             for s in stream_ids(STREAMS)]  # fmt: skip
    t0 = rng.uniform(10, 20)
    run = make_run(rng, t0, plans, max_dur=0.02)
    tracker = ShutdownTracker()
    windows = [w for s in run.samples for w in tracker.feed(s) if isinstance(w, Window)]
    (window,) = windows + tracker.close(run.end)
    return abs(window.t0 - t0)


if __name__ == "__main__":
    sys.exit(main())
