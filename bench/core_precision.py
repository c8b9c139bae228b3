"""How precisely the core measures an LB's reaction time, against the incumbent's method, and
what adaptive sampling costs in precision and saves in requests.

openshift/origin reports, per LB, the largest `elapsed` any late request carried: whole seconds,
sampled once a second. The core intersects every sample's timing constraint to place T0 and
reports `last_late_t - t0`. Both are run here on the same synthetic shutdowns with a known T0
and known LB switch times; the figure is the ratio of their p99 absolute errors.

Adaptive sampling (`core.pace`): the streams sample every `QUIET` seconds until the first late
answer ends, then every 50 ms. The same synthetic shutdowns are measured under that schedule
(reaction and T0 errors against the fixed 50 ms rate).

Bounds (issue 24): a simulated cluster (`_bounds_sim`: the real trackers, `PaceTracker` and
`BurstPlanner`, fed in completion order) measured by today's sampling (quiet, window rate,
back to quiet once bounded) and by the new one (streams resting while they wait for a delay,
an LB's fresh streams `rise` times faster while its reaction is open, witness bursts), on the
same shutdowns: per LB x protocol x connection the bound's width (p50, p90), the truths inside
it and the requests per window over a 2-hour CI run of 3 rollouts; the requests per window and
over the run, each policy against the other; then over `--sims` rollouts the truths outside
their bounds, against what `MISS_CHANCE` allows, and the p90 width on the balancing LBs'
new-connection streams.

    .venv/bin/python bench/core_precision.py [--runs N] [--sims N] [--platform aws]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import multiprocessing

import _bounds_sim as sim

from prober.core.burst import PARALLEL
from prober.core.models import LB, Connection, Window
from prober.core.reaction import MISS_CHANCE
from prober.core.shutdown import ShutdownTracker
from prober.core.stats import percentile_cont
from tests.factories import sample
from tests.support.synthetic import HOST, OTHER_HOST, StreamPlan, go_rounded, make_run, stream_ids

QUIET, WINDOW_GAP, STREAMS = 1.0, 0.05, 16
DELAYS = {"aws": (129.0, 194.0), "gcp": (95.0, 160.0), "default": (70.0, 135.0)}


def measure(rng: random.Random, gap: float, streams: int) -> tuple[list[float], list[float]]:
    """Absolute reaction errors (ours, incumbent's) over the streams of one shutdown."""
    switch = {lb: rng.uniform(1.0, 30.0) for lb in LB}  # one rotation per LB
    plans = [StreamPlan(s, gap, rng.uniform(0, gap), switch[s.lb]) for s in stream_ids(streams)]
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
    switch = {lb: rng.uniform(1.0, 30.0) for lb in LB}  # one rotation per LB
    plans = [(s, switch[s.lb], rng.uniform(0, QUIET)) for s in stream_ids(STREAMS)]

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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--platform", choices=sorted(DELAYS), default="aws")
    parser.add_argument("--sims", type=int, default=100, help="simulated rollouts for the misses")
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
    adaptive_rows(rng, args.runs, ours)
    bounds_rows(args.platform, args.sims)
    return 0


def adaptive_rows(rng: random.Random, runs: int, fixed: list[float]) -> None:
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


def bounds_rows(platform: str, sims: int) -> None:
    """Today's sampling against witness bursts with the rising rate, on the same simulated
    shutdowns (`_bounds_sim`): a 2-hour CI run of 3 rollouts, then `sims` rollouts."""
    delay, term = DELAYS[platform]
    print()
    print(f"bounds: {sim.TODAY.name} (quiet/window/release) against {sim.NEW.name} "
          f"(rise {sim.NEW.rise:g}x, bursts of at most {PARALLEL} in flight), {platform}, "
          f"delay {delay:g} s, {sim.HANDSHAKE * 1000:g} ms of the prober's CPU per fresh "
          f"connection")  # fmt: skip
    starts = [1200.0, 3600.0, 6000.0]
    ci = {p.name: simulate(p, 7, starts, (7200.0, delay, term)) for p in (sim.TODAY, sim.NEW)}
    print_stream_table(ci)
    today, new = ci[sim.TODAY.name], ci[sim.NEW.name]
    for label, key in (("mean", None), *((f"{h}'s", i) for i, h in enumerate(sim.HOSTS))):
        a, b = _per_window(today, key), _per_window(new, key)
        print(f"requests per shutdown window, {label:12} today {a:8.0f}  bursts {b:8.0f}  "
              f"{_pct(b, a)}")  # fmt: skip
    print(f"requests over the 2-hour run        today {today.requests:8d}  bursts "
          f"{new.requests:8d}  {_pct(new.requests, today.requests)} "
          f"({new.burst_requests} in bursts)")  # fmt: skip
    with multiprocessing.Pool(2) as pool:
        args = [(p, seed, delay, term) for p in (sim.TODAY, sim.NEW) for seed in range(sims)]
        rollouts = pool.starmap(_rollout, args)
    for policy, results in ((sim.TODAY, rollouts[:sims]), (sim.NEW, rollouts[sims:])):
        rows = [r for res in results for r in res.rows]
        bounded = [r for r in rows if r.hi is not None]
        outside = sum(1 for r in rows if not r.inside)
        widths = [r.width for r in rows if _balancing_fresh(r) and r.width is not None]
        print(f"{sims} rollouts, {policy.name:7}: truths outside their bound {outside} of "
              f"{len(rows)} ({len(bounded)} bounded above; MISS_CHANCE allows "
              f"{MISS_CHANCE * len(rows):.2f}); balancing LBs' new-connection streams: width "
              f"p50 {percentile_cont(widths, 0.5):.3f} s, p90 {percentile_cont(widths, 0.9):.3f} s"
              )  # fmt: skip


def simulate(policy, seed, starts, times):
    """One policy over shutdowns starting at `starts`; `times`: (end, delay, termination)."""
    end, delay, term = times
    rng = random.Random(seed)
    plan = sim.shutdowns(rng, starts, delay, term)
    return sim.Simulation(random.Random(seed + 1), policy, plan, delay, term).run(0.0, end)


def _rollout(policy, seed, delay, term):
    return simulate(policy, 1000 + seed, [20.0], (3 * (term + 60.0) + 20.0, delay, term))


def _balancing_fresh(row) -> bool:
    return row.stream.connection is Connection.NEW and row.stream.lb is not LB.LOCALHOST


def _per_window(result, which: int | None) -> float:
    counts = result.per_window if which is None else result.per_window[which::3]
    return sum(counts) / len(counts)


def _pct(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+6.1f} %"


def print_stream_table(ci) -> None:
    """Per LB x protocol x connection: bound width, truths inside, requests per window."""
    print(f"{'':38} {'today':>30}   {'bursts':>30}")
    head = f"{'w p50':>7} {'w p90':>7} {'inside':>7} {'req/win':>7}"
    print(f"{'stream':38} {head}   {head}")
    for stream in sim.STREAMS:
        cells = []
        for result in ci.values():
            rows = [r for r in result.rows if r.stream == stream]
            widths = [r.width for r in rows if r.width is not None]
            inside = sum(r.inside for r in rows)
            per = result.window_requests[stream.name] / len(result.per_window)
            w50 = percentile_cont(widths, 0.5) if widths else float("nan")
            w90 = percentile_cont(widths, 0.9) if widths else float("nan")
            cells.append(f"{w50:7.3f} {w90:7.3f} {f'{inside}/{len(rows)}':>7} {per:7.0f}")
        name = f"{stream.lb} {stream.protocol} {stream.connection}"
        print(f"{name:38} {cells[0]}   {cells[1]}")


def fixed_t0_error(rng: random.Random) -> float:
    switch = {lb: rng.uniform(1.0, 30.0) for lb in LB}
    plans = [StreamPlan(s, WINDOW_GAP, rng.uniform(0, WINDOW_GAP), switch[s.lb])
             for s in stream_ids(STREAMS)]  # fmt: skip
    t0 = rng.uniform(10, 20)
    run = make_run(rng, t0, plans, max_dur=0.02)
    tracker = ShutdownTracker()
    windows = [w for s in run.samples for w in tracker.feed(s) if isinstance(w, Window)]
    (window,) = windows + tracker.close(run.end)
    return abs(window.t0 - t0)


if __name__ == "__main__":
    sys.exit(main())
