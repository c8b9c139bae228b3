"""What the truth says of each restarted apiserver, per LB: when its /readyz went true (T1)
and when it could serve, when the LB took it back against the LB's worst add-back (interval
x healthy threshold and a timeout, `core.budgets`), and which early answers reached it through
the LB. A request names its LB in its User-Agent (`prober/<version> <stream>`, the stream
name holding the LB), so this needs nothing of the daemon's own record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from prober.core.models import LB
from prober.lab.infra.instances import AddBack, EarlyTruth, InstanceTruth, add_backs
from prober.lab.infra.platforms import Platform
from prober.lab.infra.truth import LbTruth
from prober.report.format.tables import seconds

HEADERS = (
    "instance",
    "T1 after listening",
    "serving after listening",
    "lb",
    "marked up after T1",
    "worst add-back",
    "early answers through it",
)


def lb_of(user_agent: str) -> LB | None:
    """The LB a prober's request went through, from the stream name in its User-Agent
    (`prober/<v> kube-api-http2-internal-lb-new-connections`, a watch's with ` watch`)."""
    return next((lb for lb in LB if f"-{lb}-" in user_agent), None)


def kinds(early: Iterable[EarlyTruth]) -> str:
    """`403 x12, hang/client-gone x3`: the status sent, or for no answer how it ended."""
    counts = Counter(str(e.status) if e.status is not None else f"hang/{e.how}" for e in early)
    return ", ".join(f"{kind} x{n}" for kind, n in sorted(counts.items())) or "-"


def rows(
    instances: Sequence[InstanceTruth], lbs: Mapping[LB, LbTruth], platform: Platform
) -> list[list[str]]:
    """One row per LB of every instance the lab started again (or that answered early)."""
    backs = add_backs(instances, lbs)
    found = []
    for instance in instances:
        if instance.start == 1 and not instance.early:
            continue
        t1, serving = instance.ready, instance.serving
        head = [
            instance.label,
            seconds(None if t1 is None else t1 - instance.listening),
            seconds(None if serving is None else serving - instance.listening),
        ]
        by_lb = {kind: AddBack(kind, None) for kind in lbs} | {
            b.lb: b for b in backs[instance.label]
        }
        for kind, back in by_lb.items():
            worst = None if lbs[kind].reaches is not None else platform.lb(kind).add_back
            through = [e for e in instance.early if lb_of(e.user_agent) is kind]
            found.append(
                [*head, str(kind), seconds(back.after(t1)), seconds(worst), kinds(through)]
            )
        astray = [e for e in instance.early if lb_of(e.user_agent) not in by_lb]
        if astray:
            found.append([*head, "-", "-", "-", kinds(astray)])
    return found
