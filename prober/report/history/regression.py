"""Are recent runs of a job worse than its history? A one-sided exceedance test.

The test: the one-sided exact binomial test on exceedances of a historical quantile (a sign
test against a fixed quantile, also called a quantile or exceedance test). For one key
(platform, LB, protocol, connection, metric) take the history's q-quantile `h` (P75 by default,
from thresholds.json) and the n recent runs' values; count the runs strictly above `h`: k.

* H0: the recent runs come from the history's distribution. Each then lands above `h` with
  probability at most 1 - q (exactly 1 - q for a continuous distribution, less with ties), so
  k is at most Binomial(n, 1 - q).
* H1, one-sided: the recent runs are stochastically larger, so they land above `h` more often.
* p-value = P(Binomial(n, 1 - q) >= k); a key regressed when its p-value passes Holm's
  step-down correction at `alpha` over every key tested in the same check.

Assumptions: runs are independent of each other; the history is large enough that `h` is the
true quantile (thresholds marks keys with fewer than --min-runs runs unusable, and those are not
tested; with 100 history runs the estimate of P75 moves the per-run exceedance probability by
about +-0.04, one standard deviation, which can push the false-positive rate a little above its
nominal value); the job and platform have not changed in ways the history does not cover.

False-positive rate: at most `alpha` (0.05 by default) for the whole check, over all its keys
(Holm controls the family-wise error rate under any dependence between keys); the exact test
is conservative because k is discrete. With n = 10 runs and q = 0.75, one key alone rejects at
k >= 6 (p = 0.0197 <= 0.05); over 32 keys the first rejection needs k >= 8 (p = 0.00042).

Power, for the record: with n = 10 runs, 32 keys and alpha = 0.05, a key whose recent runs
exceed the old P75 with probability 0.9 is flagged 93 % of the time; with probability 0.76
(a log-normal with sigma 0.5, doubled) 56 % of the time. More recent runs buy power.

Why this test: one noisy run cannot fail it, however extreme, because it is one exceedance out
of n (with n = 10, P(K >= 1) = 0.94); a real shift moves most runs above the old P75 and does.
It needs only the thresholds file, not every historical run, and makes no assumption about the
shape of the distribution (reaction times are skewed and bounded below, not normal).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.report.format.tables import seconds, table
from prober.report.history.export import load_facts
from prober.report.history.history import RunFacts
from prober.report.history.threshold_rows import Entry
from prober.report.history.thresholds import Thresholds, load_thresholds, run_values
from prober.report.schema.jsonio import write_json
from prober.report.schema.keys import Key, key_name
from prober.report.schema.types import Metric, RegressionDocument

QUANTILES = {"p50": 0.50, "p75": 0.75, "p95": 0.95}
DEFAULT_QUANTILE = "p75"
DEFAULT_ALPHA = 0.05


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed exactly."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    total = math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
    return min(1.0, total)


@dataclass(frozen=True, slots=True)
class Exceedance:
    n: int  # recent runs
    k: int  # of them above the historical quantile
    threshold: float  # the historical quantile
    exceed_probability: float  # under H0: 1 - q
    p_value: float


def exceedance_test(recent: Sequence[float], threshold: float, quantile: float) -> Exceedance:
    """How surprising it is, under H0, that this many recent values exceed `threshold`."""
    k = sum(1 for value in recent if value > threshold)
    p = 1.0 - quantile
    return Exceedance(len(recent), k, threshold, p, binomial_tail(k, len(recent), p))


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses to reject, controlling the family-wise error rate."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    reject = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        reject[index] = True
    return reject


@dataclass(frozen=True, slots=True)
class Regression:
    """The verdict on one key: tested (with its numbers) or not, and why."""

    platform: str
    key: Key
    metric: Metric
    test: Exceedance | None
    history: str  # which history was used, or why none was
    regressed: bool = False


def check_regression(
    recent: Iterable[RunFacts],
    thresholds: Thresholds,
    *,
    quantile: str = DEFAULT_QUANTILE,
    alpha: float = DEFAULT_ALPHA,
) -> list[Regression]:
    q = QUANTILES[quantile]
    values: dict[tuple[str, Key, Metric], list[float]] = defaultdict(list)
    for facts in recent:
        for key, metric, value in run_values(facts):
            values[(facts.platform.lower(), key, metric)].append(value)
    results: list[Regression] = []
    for (platform, key, metric), points in values.items():
        found = thresholds.lookup(platform, key, metric)
        if found.entry is None:
            results.append(Regression(platform, key, metric, None, found.source))
            continue
        test = exceedance_test(points, _quantile(found.entry, quantile), q)
        history = found.source.replace("P99", quantile.upper(), 1)
        results.append(Regression(platform, key, metric, test, history))
    tested = [(i, r.test.p_value) for i, r in enumerate(results) if r.test is not None]
    rejected = holm([p for _, p in tested], alpha)
    for (i, _), reject in zip(tested, rejected, strict=True):
        if reject:
            r = results[i]
            results[i] = Regression(r.platform, r.key, r.metric, r.test, r.history, True)
    return results


def _quantile(entry: Entry, name: str) -> float:
    value: float = getattr(entry, name)
    return value


def check_command(
    summaries: Sequence[Path],
    *,
    history: Path,
    out: Path,
    quantile: str = DEFAULT_QUANTILE,
    alpha: float = DEFAULT_ALPHA,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """`prober thresholds --check`: the summaries' runs against the history, a test per key
    (`check_regression`), into `out`/regression.json; exit 1 where one regressed."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    thresholds = load_thresholds(history)
    facts = load_facts(summaries, stderr)
    results = check_regression(facts, thresholds, quantile=quantile, alpha=alpha)
    path = out / "regression.json"
    with writing(path):
        out.mkdir(parents=True, exist_ok=True)
        write_json(path, _regression_document(results, quantile, alpha, len(facts)))
    rows = []
    for r in results:
        test = r.test
        outcome = "REGRESSED" if r.regressed else ("ok" if test else "skipped")
        numbers = (
            [f"{test.k}/{test.n}", seconds(test.threshold), f"{test.p_value:.4f}"]
            if test
            else ["-", "-", "-"]
        )
        rows.append([r.platform, key_name(r.key), r.metric, *numbers, outcome, r.history])
    headers = [
        "platform",
        "lb/protocol/connection",
        "metric",
        f"runs > {quantile}",
        f"history {quantile}",
        "p-value",
        "verdict",
        "history used",
    ]
    print(
        f"{len(facts)} recent runs against {history}: one-sided binomial exceedance test "
        f"of the history's {quantile.upper()}, Holm-corrected at alpha {alpha:g}",
        file=stdout,
    )
    print("\n".join(table(headers, rows)), file=stdout)
    if not any(r.test for r in results):
        print(
            f"warning: {history}: no usable history for these runs: nothing was tested", file=stderr
        )
    print(f"\nwrote {path}", file=stdout)
    return ExitCode.FAILED if any(r.regressed for r in results) else ExitCode.OK


def _regression_document(
    results: Sequence[Regression], quantile: str, alpha: float, runs: int
) -> RegressionDocument:
    return {
        "v": 1,
        "test": "one-sided exact binomial test on exceedances of the historical quantile, Holm",
        "quantile": quantile,
        "alpha": alpha,
        "runs": runs,
        "results": [
            {
                "platform": r.platform,
                "lb": r.key[0].value,
                "protocol": r.key[1].value,
                "connection": r.key[2].value,
                "metric": r.metric,
                "runs": r.test.n if r.test else None,
                "exceeding": r.test.k if r.test else None,
                "threshold": r.test.threshold if r.test else None,
                "p_value": r.test.p_value if r.test else None,
                "regressed": r.regressed,
                "history": r.history,
            }
            for r in results
        ],
    }
