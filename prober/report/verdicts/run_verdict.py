"""The run's own CI verdict: whether the prober recorded its whole run.

A daemon stopped through its stop path writes a `run_end` record last; one killed (SIGKILL past
a drain's grace, an OOM kill, its node gone) does not, and its log ends at its last whole
record, or in the middle of a line, which readers skip. The measurement is then whole only up
to that moment, and may have lost what `docs/ARCHITECTURE.md` ("What a kill loses") bounds.
That is no fault of an LB, and the verdicts up to that moment stand, so the test is skipped,
not failed (a kill in a drain must not fail a job that the LBs passed); but Spyglass shows
its message, and junit.xml's `ended_abruptly_at` property says it too.
"""

from __future__ import annotations

from collections.abc import Iterable

from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict

WHOLE_RUN = CaseId(Case.WHOLE_RUN)


def abrupt_end(verdicts: Iterable[Verdict]) -> str:
    """'ended abruptly at t' in words (`abrupt_text`), or "" for a run that stopped: the
    whole-run test is skipped with it as its message."""
    return next(
        (v.message for v in verdicts if v.id == WHOLE_RUN and v.status is Status.SKIPPED), ""
    )


def whole_run(summary: SummaryDocument) -> list[Verdict]:
    """One verdict, or none for a summary written before runs recorded their end."""
    ended = summary.get("ended")
    if ended is None:
        return []
    if not ended["abruptly"]:
        message = f"stopped ({ended['reason']}) at {ended['t']:.2f} s, its stop path complete"
        return [Verdict(WHOLE_RUN, None, Status.PASSED, message)]
    message = abrupt_text(summary)
    details = (
        message,
        "lost at most: the requests in flight at the kill, the records not yet written, and "
        "the counts of unlogged samples since the last summary record (docs/ARCHITECTURE.md, "
        "What a kill loses); windows and intervals still open were closed at the last record",
    )
    return [Verdict(WHOLE_RUN, None, Status.SKIPPED, message, details)]


def abrupt_text(summary: SummaryDocument) -> str:
    """'ended abruptly at t' in words, or "" for a run that stopped."""
    ended = summary.get("ended")
    if ended is None or not ended["abruptly"]:
        return ""
    return (
        f"the run ended abruptly at {ended['t']:.2f} s ({ended['ts']}): its log has no "
        "end-of-run record (the daemon was killed, or its node was lost)"
    )
