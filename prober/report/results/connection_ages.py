"""summary.json's `connection_ages`: failures, late answers and resends by the phase of their
server's shutdown in which their connection was opened (`core.connection_age`), and per LB
upstream's 20 % rule (cluster-kube-apiserver-operator #2222) as a finding and a JUnit test.

The rule: only connections opened in the last 20 % of `shutdown-delay-duration`, or later,
should fail. Per LB (localhost has none), over its streams of both protocols and connection
modes, a failure on a connection opened before the 80 % mark (before T0, or in the delay's
first 80 %) breaks it; one whose opening the bounds put on either side of the mark leaves it
undecided; one that names no server, or met a server outside its shutdown, is said and does
not count. An answer 429 or 503 with Retry-After is no failure here: client-go waits and
retries it (`core.perceived`); it is counted apart.

Its JUnit test is `age_verdicts`'; `age_tables` shows it in the text and in report.html.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prober.core.connection_age import ConnectionAges, phase_order
from prober.core.models import LB, ErrorClass
from prober.core.phase import ShutdownPhase
from prober.report.format.phase_words import phase_counts
from prober.report.schema.types import AgeFindingEntry, AgeRowEntry, ConnectionAgesSection

PHASE_NAMES = {str(p) for p in ShutdownPhase}
BEFORE_MARK = {ShutdownPhase.BEFORE, ShutdownPhase.DELAY_EARLY}
PAST_MARK = {ShutdownPhase.DELAY_LATE, ShutdownPhase.AFTER}


def ages_section(ages: ConnectionAges | None, shutdowns: int) -> ConnectionAgesSection | None:
    """The section of a replayed run; None for a log without samples."""
    if ages is None:
        return None
    rows: list[AgeRowEntry] = [
        {
            "stream": r.stream_id.name,
            "lb": str(r.stream_id.lb),
            "protocol": str(r.stream_id.protocol),
            "connection": str(r.stream_id.connection),
            "opened": str(r.opened),
            "late": dict(r.late),
            "failed": dict(r.failed),
            "resent": dict(r.resent),
            "errors": dict(r.errors),
        }
        for r in ages.rows
    ]
    lbs = [lb for lb in LB if lb is not LB.LOCALHOST and any(r["lb"] == lb for r in rows)]
    return {"rows": rows, "findings": [finding(lb, rows, shutdowns) for lb in lbs]}


def phases_of(opened: str) -> set[ShutdownPhase] | None:
    """The phases a row's `opened` allows; None where it is a reason it has none."""
    names = opened.split("|")
    if not all(name in PHASE_NAMES for name in names):
        return None
    return {ShutdownPhase(name) for name in names}


def finding(lb: LB, rows: Sequence[AgeRowEntry], shutdowns: int) -> AgeFindingEntry:
    sides: dict[str, Counter[str]] = {k: Counter() for k in ("breaking", "ambiguous", "within")}
    unplaced, errors, late, resent = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    retry_after = 0
    for row in (r for r in rows if r["lb"] == lb):
        told = row["errors"].get(ErrorClass.RETRY_AFTER.value, 0)
        retry_after += told
        failed = sum(row["failed"].values()) - told
        phases = phases_of(row["opened"])
        if row["opened"] == ShutdownPhase.BEFORE:
            late.update(row["late"])
        if row["resent"]:
            resent[row["opened"]] += sum(row["resent"].values())
        if not failed:
            continue
        if phases is None:
            unplaced[row["opened"]] += failed
            continue
        side = "breaking" if phases <= BEFORE_MARK else "within" if phases <= PAST_MARK else (
            "ambiguous"
        )  # fmt: skip
        sides[side][row["opened"]] += failed
        if side == "breaking":
            errors.update({k: v for k, v in row["errors"].items() if k != "retry_after"})
    rule = "untested" if not shutdowns else (
        "broken" if sides["breaking"] else "undecided" if sides["ambiguous"] else "held"
    )  # fmt: skip
    entry: AgeFindingEntry = {
        "lb": str(lb),
        "rule": rule,
        "breaking": _ordered(sides["breaking"]),
        "ambiguous": _ordered(sides["ambiguous"]),
        "within": _ordered(sides["within"]),
        "unplaced": dict(sorted(unplaced.items())),
        "retry_after": retry_after,
        "errors": dict(sorted(errors.items())),
        "late_before_t0": _ordered(late),
        "resent": _ordered(resent),
        "text": "",
    }
    entry["text"] = finding_text(entry)
    return entry


def finding_text(f: AgeFindingEntry) -> str:
    """The finding in one line: every number is one of the entry's."""
    if f["rule"] == "untested":
        return f"{f['lb']}: 20 % rule not tested: no kube-apiserver shut down"
    parts = [f"{f['lb']}: 20 % rule {f['rule']}"]
    breaking = sum(f["breaking"].values())
    if breaking:
        classes = ", ".join(f"{n} {c}" for c, n in f["errors"].items())
        parts.append(
            f"{_many(breaking, 'request')} failed on connections opened before the delay's "
            f"last 20 % ({phase_counts(f['breaking'])}; {classes})"
        )
    else:
        parts.append("no request failed on a connection opened before the delay's last 20 %")
    if f["ambiguous"]:
        parts.append(
            f"{sum(f['ambiguous'].values())} on connections opened too near the 80 % mark to "
            f"tell ({phase_counts(f['ambiguous'])})"
        )
    if f["within"]:
        parts.append(f"{sum(f['within'].values())} on connections opened past the mark "
                     f"({phase_counts(f['within'])})")  # fmt: skip
    if f["unplaced"]:
        unplaced = phase_counts(f["unplaced"])
        parts.append(f"{sum(f['unplaced'].values())} failed unplaced ({unplaced})")
    if f["retry_after"]:
        parts.append(f"{f['retry_after']} answered with Retry-After, which client-go retries")
    if f["late_before_t0"]:
        parts.append(
            f"connections opened before T0 answered late {sum(f['late_before_t0'].values())} "
            f"times ({phase_counts(f['late_before_t0'])})"
        )
    if f["resent"]:
        parts.append(
            f"{_many(sum(f['resent'].values()), 'request')} resent after their kept connection "
            f"was cut (opened {phase_counts(f['resent'])})"
        )
    return "; ".join(parts)


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _ordered(counts: Counter[str]) -> dict[str, int]:
    """In phase order, as the tracker's rows are."""
    return {k: counts[k] for k in sorted(counts, key=phase_order)}
