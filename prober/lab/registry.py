"""The lab's scenarios: each one object that says what it does to the apiservers, how its
daemons run, its own options, and the checks it holds their measurement to."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prober.common.values import duration, flag, non_negative_float, positive_float
from prober.config.fields import size
from prober.core.durations import format_go_duration
from prober.core.models import LB
from prober.lab import checks
from prober.lab.checks import Check, Reader
from prober.lab.infra.options import LabError, LabOptions
from prober.lab.infra.platforms import SLOW_INTERVAL, Platform, slow_lb
from prober.lab.measure import (
    Measure,
    delayed_daemon,
    evicted_daemon,
    one_daemon,
    upgrade_probers,
)
from prober.lab.scenarios.delayed import DELAY, sigterm_delayed
from prober.lab.scenarios.playbook import (
    EARLY_ANSWERS,
    EARLY_FOR,
    TakeDown,
    early_flags,
    sigkill,
    sigterm,
    sigterm_early_ready,
    vanish,
)


@dataclass(frozen=True, slots=True, eq=False)  # each is one of the constants below
class Option:
    """One of a scenario's own flags: `dest` is the `LabOptions` field it sets (or the
    command's, for `--compare-watch-grace`), `spec` argparse's keywords for it. Its default
    is None; the scenario gives the value None stands for."""

    flag: str
    dest: str
    help: str
    spec: Mapping[str, Any] = field(default_factory=dict)


def graces(text: str) -> list[float]:
    """`--compare-watch-grace`'s durations, comma-separated (how many: `watchgrace`)."""
    parse = flag(duration(allow_zero=True))
    return [parse(part.strip()) for part in text.split(",") if part.strip()]


PROBER_ON = Option(
    "--prober-on",
    "prober_on",
    "also run a daemon on this master (kernel path; master-0 is the one the rollout takes "
    "down first): on gcp its internal LB hairpins to the master's own apiserver; its "
    "same-node results are judged apart, never as the LB's",
    {"metavar": "MASTER"},
)
COMPARE_WATCH_GRACE = Option(
    "--compare-watch-grace",
    "compare_watch_grace",
    "run the scenario once per --shutdown-watch-termination-grace-period, comma-separated "
    "and before the time scale (OpenShift's question: 0s,25s), and print per LB x protocol "
    "watch ends, doomed re-watches, re-establish p50/p99, blind seconds and requests answered "
    "429",
    {"metavar": "DURATIONS", "type": graces},
)
SLOW_LB = Option(
    "--slow-lb",
    "slow_lb",
    "which LB is slow (external-lb)",
    {"choices": (LB.EXTERNAL, LB.INTERNAL), "type": LB},
)
SLOW_LB_INTERVAL = Option(
    "--slow-lb-interval",
    "slow_interval",
    "the slow LB's check interval and timeout, as a fraction of the shutdown delay; it marks "
    f"a target down after 3 failures ({SLOW_INTERVAL:g}: after 2.4 delays at worst)",
    {"type": flag(positive_float), "metavar": "FRACTION"},
)
DELAYED_LB = Option(
    "--delayed-lb",
    "delayed_lb",
    f"which LB answers late: a relay holds every chunk through it {DELAY:g} s each way while "
    "an apiserver drains (external-lb)",
    {"choices": (LB.EXTERNAL, LB.INTERNAL), "type": LB},
)
EARLY_FOR_OPTION = Option(
    "--early-for",
    "early_for",
    "how long a restarted apiserver's /readyz says ok before it can serve, before the time "
    f"scale ({format_go_duration(EARLY_FOR)}: past AWS NLB's 30 s worst add-back, so every "
    "LB routes to it meanwhile)",
    {"type": flag(duration()), "metavar": "DURATION"},
)
EARLY_ANSWER = Option(
    "--early-answer",
    "early_answer",
    "what it answers meanwhile: 500, 403 (a known user forbidden) or hang (nothing until the "
    "client gives up) (500)",
    {"choices": EARLY_ANSWERS},
)
LOG_MAX_SIZE = Option(
    "--container-log-max-size",
    "log_max_size",
    "where the kubelet rotates a container's log (containerLogMaxSize; 10MiB, OpenShift "
    "nodes 50MiB); a gather reads only the newest file",
    {"type": flag(size), "metavar": "SIZE"},
)

HOLD = Option(
    "--hold",
    "hold",
    "after the rollout, keep sampling this long (never scaled) before the daemon stops: "
    "time for the kept HTTP/2 connections to rebalance after the last restart (0)",
    {"type": flag(non_negative_float), "metavar": "SECONDS"},
)


def _unchanged(platform: Platform, options: LabOptions) -> Platform:
    return platform


def _no_flags(options: LabOptions, platform: Platform) -> tuple[str, ...]:
    return ()


def _slowed(platform: Platform, options: LabOptions) -> Platform:
    interval = SLOW_INTERVAL if options.slow_interval is None else options.slow_interval
    return slow_lb(platform, options.slow_lb or LB.EXTERNAL, interval)


def _silent(platform: Platform, options: LabOptions) -> str | None:
    return None


def slow_text(platform: Platform, options: LabOptions) -> str | None:
    """Which LB `slow-lb` made slow, and by how much: the line a reader of its FAILs needs."""
    kind = options.slow_lb or LB.EXTERNAL
    check = platform.lb(kind).check
    assert check is not None
    return (
        f"slow-lb: {kind} checks /readyz every {check.interval:.2f} s (timeout "
        f"{check.timeout:.2f} s, {check.fall} failures to mark down): it may take "
        f"{check.worst_detection:.2f} s, past the {platform.shutdown_delay:.2f} s delay"
    )


def _early(options: LabOptions, platform: Platform) -> tuple[str, ...]:
    seconds = EARLY_FOR if options.early_for is None else options.early_for
    return early_flags(seconds * platform.time_scale, options.early_answer or "500")


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str  # one line: what it does and what it shows
    read: Reader  # the result from what the daemons wrote
    checks: tuple[Check, ...] = ()  # then each claim against the truth, in this order
    take_down: TakeDown = sigterm
    measure: Measure = one_daemon
    options: tuple[Option, ...] = ()
    fake_only: bool = False  # needs the fake apiserver's knobs or its probers as pods
    kernel_only: str | None = None  # why it needs network namespaces
    shape: Callable[[Platform, LabOptions], Platform] = _unchanged  # the platform it plays on
    restart_flags: Callable[[LabOptions, Platform], tuple[str, ...]] = _no_flags
    start_flags: tuple[str, ...] = ()  # apiserver flags for every start (fake only)
    announce: Callable[[Platform, LabOptions], str | None] = _silent  # said before it starts


_BESIDE = (PROBER_ON,)
_GRACEFUL = (PROBER_ON, COMPARE_WATCH_GRACE)
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("rollout", "SIGTERM each apiserver in turn, as a rollout does",
                 checks.event_log, checks.MEASURED, options=(*_GRACEFUL, HOLD)),
        Scenario("crash", "SIGKILL each in turn: no delay, no drain",
                 checks.event_log, (checks.watch_streams, checks.informers, checks.disrupted,
                                    checks.answered, checks.restarts),
                 take_down=sigkill, options=_BESIDE),
        Scenario("slow-lb", "a rollout behind an LB whose health check is too slow for the "
                 "shutdown delay", functools.partial(checks.event_log, lb_fails=True),
                 checks.MEASURED, options=(SLOW_LB, SLOW_LB_INTERVAL, *_GRACEFUL),
                 shape=_slowed, announce=slow_text),
        Scenario("delayed-lb", "a rollout behind an LB that answers every request late while "
                 "an apiserver drains: slow but up", checks.event_log, (checks.slow_but_up,),
                 take_down=sigterm_delayed, measure=delayed_daemon, options=(DELAYED_LB,)),
        Scenario("upgrade", "the probers run as pods on the masters, drained and rebooted with "
                 "them; judged by what a gather keeps", checks.gathered,
                 measure=upgrade_probers, options=(LOG_MAX_SIZE,), fake_only=True),
        Scenario("node-loss", "each master vanishes in turn: every packet dropped",
                 checks.event_log, (checks.watch_streams, checks.informers, checks.node_losses,
                                    checks.answered, checks.restarts),
                 take_down=vanish, options=_BESIDE,
                 kernel_only="a node can vanish only on the kernel path"),
        Scenario("early-ready", "a restarted apiserver says ready before it can serve",
                 checks.event_log, checks.MEASURED, take_down=sigterm_early_ready,
                 options=(EARLY_FOR_OPTION, EARLY_ANSWER, *_BESIDE), fake_only=True,
                 restart_flags=_early),
        Scenario("evict", "a rollout, the daemon killed inside the first window and replaced "
                 "as a drain evicts it; judged by its pod logs", checks.pod_logs,
                 measure=evicted_daemon, fake_only=True),
        Scenario("no-marker", "a rollout whose apiservers never send a watch-list's "
                 "initial-events-end bookmark: every watch stream's sync stalls until its "
                 "watch ends", checks.event_log, (checks.watch_stalls,), fake_only=True,
                 start_flags=("--withhold-initial-events-end",)),
    )
}  # fmt: skip
OPTIONS: tuple[Option, ...] = tuple(dict.fromkeys(o for s in SCENARIOS.values() for o in s.options))


def misplaced(scenario: Scenario, given: Mapping[str, object]) -> str | None:
    """The one line that refuses an option `given` (by dest) that is not the scenario's."""
    for option in OPTIONS:
        if given.get(option.dest) is not None and option not in scenario.options:
            owners = [s.name for s in SCENARIOS.values() if option in s.options]
            return (
                f"{option.flag}: an option of --scenario {' or '.join(owners)}, not of "
                f"{scenario.name} (prober lab --scenario NAME --help lists a scenario's own)"
            )
    return None


def scenario_of(options: LabOptions) -> Scenario:
    """The options' scenario, refusing an option that is not its own."""
    scenario = SCENARIOS[options.scenario]
    wrong = misplaced(scenario, dataclasses.asdict(options))
    if wrong is not None:
        raise LabError(wrong)
    return scenario
