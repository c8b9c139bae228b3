"""Which test a verdict is, as typed fields: the test, and the LB, protocol, connection and
target it judged. The JUnit name is printed from them and never read back: the documents
and the lab ask a verdict's fields which test it is.

The names are the ones CI keeps (Sippy files a test's history under its name): the
`[sig-api-machinery]` prefix as origin's own tests, the LB, protocol and connection as
path-like words. A change to any text below is a new test to CI, with no history.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from prober.core.models import LB, Protocol

_KEYED = "[sig-api-machinery] load-balancer/{lb} protocol/{protocol} connection/{connection}"
_WATCH = "[sig-api-machinery] load-balancer/{lb} protocol/{protocol} watch"
_PER_LB = "[sig-api-machinery] load-balancer/{lb}"


class Case(StrEnum):
    """Every test `junit.xml` reports, as the template of its name."""

    ROUTING = f"{_KEYED} should stop routing to a kube-apiserver before it stops serving"
    AVAILABLE = f"{_KEYED} should be available throughout the test"
    WITHIN_BUDGET = (
        f"{_KEYED} should stop routing to a shutting-down apiserver within its health-check budget"
    )
    DELAY_COVERS = f"{_KEYED} should be covered by the shutdown delay"
    SAMPLED = f"{_KEYED} should have sampled each shutdown window without a gap"
    REESTABLISH = f"{_WATCH} should re-establish within its limit"
    NOT_DOOMED = f"{_WATCH} should not land on a shutting-down apiserver"
    NOT_BLIND = f"{_WATCH} should not be blind longer than its limit"
    NO_RESETS = f"{_PER_LB} should not reset connections to a kube-apiserver that still serves"
    TWENTY_PERCENT = (
        f"{_PER_LB} should fail only connections opened in the last 20 % of the shutdown delay"
    )
    BEFORE_IT_CAN_SERVE = f"{_PER_LB} should not route to an apiserver before it can serve"
    NOT_SLOW = f"{_KEYED} should answer in the shutdown windows about as fast as outside them"
    WHOLE_RUN = "[sig-api-machinery] prober should record the whole run, to its stop"


# A request stream's key, or a watch stream's (lb, protocol, "watch"); None: the run's own.
VerdictKey = tuple[LB, Protocol, str] | None


@dataclass(frozen=True, slots=True)
class CaseId:
    """One test of one run (a JUnit testcase): the test, and what it judged (None where the
    test has no such part: the whole-run test judges no LB, a per-LB test no protocol)."""

    case: Case
    lb: LB | None = None
    protocol: Protocol | None = None
    connection: str | None = None  # a Connection's value, or "watch" for a watch stream's
    target: str | None = None  # set only where two targets share the LB x protocol x connection

    @classmethod
    def of(cls, case: Case, key: tuple[LB, Protocol, str], target: str | None = None) -> CaseId:
        lb, protocol, connection = key
        return cls(case, lb, protocol, str(connection), target)

    @property
    def key(self) -> VerdictKey:
        if self.lb is None or self.protocol is None or self.connection is None:
            return None
        return (self.lb, self.protocol, self.connection)

    @property
    def name(self) -> str:
        name = self.case.format(lb=self.lb, protocol=self.protocol, connection=self.connection)
        if self.target is not None:  # two targets behind the same LB: tell their tests apart
            here = f"connection/{self.connection}"
            name = name.replace(here, f"{here} target/{self.target}")
        return name
