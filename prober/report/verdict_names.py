"""Which test a verdict is, read back from its name: what the documents show apart.

The verdict modules name their tests; the documents only read the verdicts they were handed,
so that writing them never calls back into the stage that judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prober.core.models import LB
from prober.report.age_verdicts import TWENTY_PERCENT
from prober.report.budget_verdicts import DELAY_COVERS, WITHIN_BUDGET
from prober.report.run_verdict import WHOLE_RUN
from prober.report.verdicts import Status, Verdict


def is_budget_test(verdict: Verdict) -> bool:
    """One of `budget_verdicts`' tests (the tables show them in a column of their own)."""
    return verdict.name.endswith((DELAY_COVERS.rsplit("}", 1)[1], WITHIN_BUDGET.rsplit("}", 1)[1]))


def age_statuses(verdicts: Iterable[Verdict]) -> dict[str, str]:
    """Each LB's outcome of the test, for the report's findings."""
    names = {TWENTY_PERCENT.format(lb=lb): str(lb) for lb in LB}
    return {names[v.name]: str(v.status) for v in verdicts if v.name in names}


def abrupt_end(verdicts: Iterable[Verdict]) -> str:
    """'ended abruptly at t' in words (`run_verdict.abrupt_text`), or "" for a run that
    stopped: the whole-run test is skipped with it as its message."""
    return next(
        (v.message for v in verdicts if v.name == WHOLE_RUN and v.status is Status.SKIPPED), ""
    )


def outcomes(verdicts: Iterable[Verdict], template: str, key: tuple[str, str, str]) -> str:
    """The outcomes of that template's tests for that key, every target's (`verdicts._name`
    puts a target after the connection), joined by "/"; "-" where there is none."""
    lb, protocol, connection = key
    name = template.format(lb=lb, protocol=protocol, connection=connection)
    found = {v.status.value for v in verdicts if re.sub(r" target/\S+", "", v.name) == name}
    return "/".join(sorted(found)) or "-"
