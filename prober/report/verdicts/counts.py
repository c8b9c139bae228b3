"""Verdicts counted as junit.xml counts them: every output that counts verdicts (the
terminal, summary.json, report.html, `prober lab`'s last line) says these numbers, in these
words, so that no two of them disagree."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prober.report.verdicts.verdicts import Status, Verdict


def cases(verdict: Verdict) -> list[tuple[Verdict, Status]]:
    """A verdict's testcases: one, or for one by design, a failure and then a pass of the
    same name: how origin writes a known flake, which Sippy counts apart and no job fails on."""
    if verdict.status is Status.BY_DESIGN:
        return [(verdict, Status.FAILED), (verdict, Status.PASSED)]
    return [(verdict, verdict.status)]


def counts(verdicts: Sequence[Verdict]) -> Counter[Status]:
    """What junit.xml counts: its testcases by status (a verdict by design is one failed and
    one passed), and `Status.BY_DESIGN`: how many of the failed are by design."""
    counted = Counter(status for verdict in verdicts for _, status in cases(verdict))
    counted[Status.BY_DESIGN] = sum(v.status is Status.BY_DESIGN for v in verdicts)
    return counted


def counts_text(verdicts: Sequence[Verdict]) -> str:
    """junit.xml's counts in its own words, for every output that counts verdicts."""
    c = counts(verdicts)
    tests = c[Status.FAILED] + c[Status.PASSED] + c[Status.SKIPPED]
    text = (
        f"{tests} tests, {c[Status.FAILED]} failed, {c[Status.PASSED]} passed, "
        f"{c[Status.SKIPPED]} skipped"
    )
    if c[Status.BY_DESIGN]:
        text += f" ({c[Status.BY_DESIGN]} of the failed by design, each passed again)"
    return text
