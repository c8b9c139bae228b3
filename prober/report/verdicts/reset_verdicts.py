"""The test of cause `lb-reset` (`causes`): per LB, `... should not reset connections to a
kube-apiserver that still serves`.

A flow the LB resets as it takes a server out fails its request though the server still
served it. Where the platform's LB settings reset flows on purpose (the AWS NLB's connection
termination on deregistration, HAProxy's `on-marked-down shutdown-sessions`), resets at the
LB's detection are predicted: the test is reported as origin reports a known flake, failed
and then passed under the same name (`Status.BY_DESIGN`; Sippy counts it apart), with the
prediction and the count in its text. Resets later than the LB's detection could explain,
and any reset on an LB whose settings keep flows, fail it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prober.core.budgets import Flows, Platform
from prober.core.models import LB
from prober.report.format.anchors import utc
from prober.report.results.causes import Cause, cause_of, detecting, serving_window
from prober.report.results.pattern_labels import pattern_words
from prober.report.schema.keys import entry_key
from prober.report.schema.types import IntervalEntry, SummaryDocument, WindowEntry
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, plural, same_node_only

LB_RESET = str(Cause.LB_RESET)
# What resets a platform's flows, in its own words (`core.budgets` cites the sources).
RESETS_BY = {
    "aws": (
        "the NLB's connection termination, target_health_state.unhealthy."
        "connection_termination.enabled, true by default; set false with an "
        "unhealthy.draining_interval of at least the shutdown delay, kept connections end by "
        "the apiserver's own GOAWAY or close"
    ),
    "metal": "HAProxy's on-marked-down shutdown-sessions, machine-config-operator #6400",
}


@dataclass(frozen=True, slots=True)
class Reset:
    stream: str
    interval: IntervalEntry
    window: WindowEntry

    def text(self, started: str | None, pattern: bool = False) -> str:
        """`pattern`: with what the interval points at (`results.patterns`), for its own line
        of the failure text; the one-line message goes without."""
        i, w = self.interval, self.window
        when = utc(started, i["start_t"])
        after = i["start_t"] - w["t0"]
        return (
            f"{self.stream}: {plural(i['samples'], 'request')} reset at {i['start_t']:.2f} s"
            + (f" = {when}" if when else "")
            + f", {after:.2f} s after apiserver {w['host']}'s /readyz went false"
            + (pattern_words(i) if pattern else "")
        )


def judge_resets(summary: SummaryDocument, profile: Platform | None) -> list[Verdict]:
    """One test per LB the summary has streams of (localhost has no LB to reset a flow)."""
    lbs = [
        lb for lb in LB
        if lb is not LB.LOCALHOST and any(s["lb"] == lb for s in summary["streams"])
    ]  # fmt: skip
    return [_verdict(summary, lb, profile) for lb in lbs]


def _resets(summary: SummaryDocument, lb: LB) -> Iterator[Reset]:
    windows = summary["windows"]
    for entry in summary["streams"]:
        if entry["lb"] != lb:
            continue
        for i in entry["intervals"]:
            window = serving_window(i["start_t"], windows)
            if cause_of(i, lb, windows) is Cause.LB_RESET and window is not None:
                yield Reset(entry["stream"], i, window)


def _verdict(summary: SummaryDocument, lb: LB, profile: Platform | None) -> Verdict:
    case = CaseId(Case.NO_RESETS, lb)
    keys = {entry_key(s) for s in summary["streams"] if s["lb"] == lb}
    same = [reason for k in sorted(keys) if (reason := same_node_only(summary, k)) is not None]
    if len(same) == len(keys):  # nothing of the LB was measured from the prober's node
        return Verdict(case, None, Status.SKIPPED, same[0])
    if not summary["windows"]:
        return Verdict(case, None, Status.SKIPPED, "no kube-apiserver shut down during the run")
    resets = list(_resets(summary, lb))
    count = sum(r.interval["samples"] for r in resets)
    if not resets:
        shutdowns = plural(len(summary["windows"]), "shutdown")
        message = f"no request through it was reset while its kube-apiserver served ({shutdowns})"
        return Verdict(case, None, Status.PASSED, message, (), 0.0, 0.0)
    started = summary.get("started")
    first = resets[0].text(started) + (
        "" if len(resets) == 1 else f" (and {len(resets) - 1} more below)"
    )
    what = f"{plural(count, 'request')} {Cause.LB_RESET.words} (cause {Cause.LB_RESET})"
    settings = None if profile is None else profile.lb(lb)
    status = Status.FAILED
    if settings is None or settings.flows is not Flows.RESET:
        kept = "its settings are not known" if settings is None else "its settings keep flows"
        message = f"{what}, which {kept}: {first}"
    else:
        assert profile is not None
        detection = settings.stop_routing
        late = [r for r in resets if not detecting(r.interval["start_t"], r.window, settings)]
        how = RESETS_BY.get(profile.name, "its settings reset established flows")
        prediction = (
            f"on {profile.name} this LB resets the flows of a server it takes out ({how}): "
            f"predicted within its detection, {detection:.2f} s after T0"
        )
        if late:
            message = (
                f"{plural(sum(r.interval['samples'] for r in late), 'request')} reset later "
                f"than its detection could explain (cause {Cause.LB_RESET}): "
                f"{late[0].text(started)}; {prediction}"
            )
        else:
            status, message = Status.BY_DESIGN, f"by design: {what}, {prediction}; {first}"
    details = (message, *(r.text(started, pattern=True) for r in resets))
    return Verdict(case, None, status, message, details, float(count), 0.0, LB_RESET)
