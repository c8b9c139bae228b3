"""`prober lab`: fake apiservers behind real LBs, a rollout, the daemon measuring it

Run the prober against a local stand-in cluster and check it against truth.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prober.cli.parsing import Subparsers, add_command, options_of
from prober.common.errors import UserError
from prober.common.values import duration, flag, non_negative_float, positive_float, positive_int

if TYPE_CHECKING:
    from collections.abc import Mapping

    from prober.lab.infra.options import LabOptions
    from prober.lab.registry import Option, Scenario

EXAMPLE = """\
examples:
  prober lab                                   # AWS profile, rolling restart, about 2 minutes
  prober lab --platform gcp --scenario slow-lb --check
  prober lab --platform aws,gcp,azure,metal --repeat 5 --out history/
  prober lab --platform metal --time-scale 1   # real durations: the full shutdown delay
  prober lab --platform gcp --scenario upgrade --time-scale 0.05 --check
  prober lab --scenario node-loss --check       # a master vanishes: every packet dropped
  prober lab --platform aws --lb haproxy       # HAProxy in place of the pass-through LBs
  prober lab --platform gcp --prober-on master-0 --check   # GCP's hairpin, from a master
  prober lab --platform aws,gcp --compare-watch-grace 0s,25s --time-scale 0.2
  prober lab --scenario early-ready --early-for 1m --early-answer 403 --time-scale 0.05
  prober lab --apiserver upstream --platform gcp --time-scale 0.2 --check   # `make upstream`

Stands up three fake kube-apiservers behind real load balancers configured like the
platform's LBs (pass-through nftables DNAT with conntrack in network namespaces, or HAProxy),
runs `prober run` against them through every LB, plays the scenario, and holds what the
daemon measured against the ground truth (the apiservers' own records and the LBs' logs of
state changes). --scenario upgrade runs the probers as pods through a rollout, node drains and
reboots, and judges only what a gather step could read of them (OUT/gathered/).
--prober-on runs a second daemon on a master, whose hairpin LBs it reaches through its own
apiserver, and judges its same-node results apart from its LB results (OUT/<master>/).
--scenario early-ready is the rollout with the bug of openshift/kubernetes #2730: each
restarted apiserver's /readyz says ok --early-for before it can serve, answering
--early-answer meanwhile; the next shutdown waits until it serves.
--compare-watch-grace runs the scenario once per watch grace period (OUT/grace-<d>/, each a
whole lab run) and prints per LB x protocol what the watches met, also in
OUT/watch-grace.json.
Its last line says what the run proved: whether the measurement held against the truth, and
junit.xml's verdicts on the LBs in junit.xml's counts.
Exit codes: 0 done (with --check: the measurement held against the truth; the LB verdicts
never change it, since an LB that fails its tests is what was measured, and `prober analyze`
of the same log exits 1 on such a failure, as a CI job would), 1 --check found a measurement
off the truth or an estimate its outputs show outside its own bound, 2 bad usage or a failure
to stand the lab up, 130 interrupted (Ctrl-C).
"""


def register(sub: Subparsers) -> None:
    from prober.lab.infra.platforms import PLATFORMS  # noqa: PLC0415
    from prober.lab.registry import OPTIONS, SCENARIOS  # noqa: PLC0415

    parser = add_command(sub, "lab", __doc__, EXAMPLE, _run)
    parser.add_argument(
        "--platform",
        dest="platforms",
        metavar="PLATFORM",
        default="aws",
        type=lambda text: _platforms(text, sorted(PLATFORMS)),
        help=f"one or more of {', '.join(sorted(PLATFORMS))}, comma-separated (aws)",
    )
    # A scenario's own options show in --help once it is named before it: the command's
    # own list stays short, and each scenario's is where its user looks.
    own = parser.add_argument_group("the scenario's own options")
    revealed = {o: own.add_argument(o.flag, dest=o.dest, help=argparse.SUPPRESS, **o.spec)
                for o in OPTIONS}  # fmt: skip
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="rollout",
        action=_Scenario,
        revealed=revealed,
        group=own,
        help="; ".join(f"{s.name}: {s.summary}" for s in SCENARIOS.values())
        + " (rollout). `prober lab --scenario NAME --help` lists its own options",
    )
    parser.add_argument(
        "--time-scale",
        type=flag(positive_float),
        metavar="FACTOR",
        help="multiply every delay and health-check interval (default: fit about 2 minutes)",
    )
    parser.add_argument(
        "--repeat", type=flag(positive_int), default=1, metavar="N", help="runs per platform"
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="default ./lab-out/<timestamp>")
    parser.add_argument("--check", action="store_true", help="exit 1 when a measurement misses")
    parser.add_argument(
        "--tolerance",
        type=flag(positive_float),
        default=0.1,
        metavar="SECONDS",
        help="how far the truth may lie outside a measured bound (clocks, LB processing;"
        " the sampling gaps are in the bound already) (0.1)",
    )
    parser.add_argument("--interval", default="100ms", help="daemon: gap per worker (100ms)")
    parser.add_argument(
        "--quiet-interval",
        type=flag(non_negative_float),
        metavar="SECONDS",
        help="daemon: a stream's gap while no apiserver shuts down (default: 1 s x the time "
        "scale); 0: the window rate throughout",
    )
    parser.add_argument(
        "--workers",
        type=flag(positive_int),
        help="daemon: workers per stream (2; upgrade: 1 for each of its three daemons)",
    )
    parser.add_argument(
        "--goaway-chance",
        type=float,
        default=0.0,
        help="apiservers: fraction of HTTP/2 requests answered with GOAWAY (OpenShift: 0.001)",
    )
    parser.add_argument(
        "--lb",
        choices=("kernel", "haproxy"),
        help="the LBs' data path: kernel (network namespaces, nftables DNAT and conntrack, "
        "pass-through as the clouds' LBs and kube-proxy are) or haproxy (a TCP proxy, as bare "
        "metal runs); default: kernel for aws, gcp, azure and none when the lab can make "
        "namespaces (root)",
    )
    fake_only = ", ".join(s.name for s in SCENARIOS.values() if s.fake_only)
    parser.add_argument(
        "--apiserver",
        choices=("fake", "upstream"),
        default="fake",
        help="the apiservers: fake (the lab's own, fast and faultable: every scenario) or "
        "upstream (kube-apiserver v1.37.2 with OpenShift's shutdown header, built by `make "
        f"upstream`: every scenario but {fake_only}) (fake)",
    )
    parser.add_argument(
        "--shutdowns",
        type=positive_int,
        metavar="N",
        help="take only the first N apiservers down (default: all)",
    )
    parser.add_argument(
        "--watch-grace",
        type=flag(duration(allow_zero=True)),
        metavar="DURATION",
        help="apiservers: --shutdown-watch-termination-grace-period, before the time scale "
        "(0s, upstream's default: watches are cut when a server stops; OpenShift tried 25s)",
    )
    for name, instead in REMOVED.items():
        parser.add_argument(name, nargs=0, action=_Removed, instead=instead, help=argparse.SUPPRESS)


# Flags that were, and what stands in their place: each refused in one line.
REMOVED = {
    "--evict": "a scenario of its own now: --scenario evict",
    "--control": "no longer a lab option: bench/policies.py runs the control daemon beside "
    "the lab's and prints both sampling policies side by side",
}


class _Scenario(argparse.Action):
    """`--scenario NAME`, which also shows NAME's own options in a later --help."""

    def __init__(
        self,
        *args: Any,
        revealed: dict[Option, argparse.Action],
        group: argparse._ArgumentGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.revealed, self.group = revealed, group
        self.scenarios: Mapping[str, Scenario] = kwargs["choices"]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        setattr(namespace, self.dest, values)
        self.group.title = f"options of --scenario {values}"
        for option, action in self.revealed.items():
            shown = option in self.scenarios[values].options
            action.help = option.help if shown else argparse.SUPPRESS


class _Removed(argparse.Action):
    def __init__(self, *args: Any, instead: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instead = instead

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        parser.error(f"{option_string}: {self.instead}")


def _platforms(text: str, known: list[str]) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        # Worded as argparse words --scenario's choices: the user learns what exists.
        shown = ", ".join(repr(name) for name in unknown) or repr(text)
        choices = ", ".join(repr(name) for name in known)
        raise argparse.ArgumentTypeError(f"unknown platform {shown} (choose from {choices})")
    return names


def lab_options(args: argparse.Namespace, platform: str) -> LabOptions:
    """The run's options from its flags; each platform's run replaces `platform`, and the
    lab always stands up three masters."""
    from prober.lab.infra.options import LabOptions  # noqa: PLC0415

    return options_of(LabOptions, args, unflagged=("servers",), platform=platform)


def _run(args: argparse.Namespace) -> int:
    from prober.lab.commands import default_out, lab_command  # noqa: PLC0415
    from prober.lab.registry import SCENARIOS, misplaced  # noqa: PLC0415

    wrong = misplaced(SCENARIOS[args.scenario], vars(args))
    if wrong is not None:
        raise UserError(wrong)
    platforms = args.platforms if isinstance(args.platforms, list) else [args.platforms]
    options = lab_options(args, platforms[0])
    if args.compare_watch_grace is not None:
        from prober.lab.gracecommand import grace_command  # noqa: PLC0415

        if args.repeat > 1:
            raise UserError("--compare-watch-grace: one run per grace; --repeat is not for it")
        return grace_command(
            options,
            platforms,
            args.compare_watch_grace,
            out=args.out or default_out(),
            check=args.check,
            stdout=sys.stdout,
            stderr=sys.stderr,
        )
    return lab_command(
        options,
        platforms,
        out=args.out or default_out(),
        repeat=args.repeat,
        check=args.check,
        stdout=sys.stdout,
        stderr=sys.stderr,
    )
