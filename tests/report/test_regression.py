"""The regression test across runs, on synthetic distributions whose answer is known."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection, Protocol
from prober.report.history.history import RunFacts, WorstOfRun
from prober.report.history.regression import binomial_tail, check_regression, exceedance_test, holm
from prober.report.history.thresholds import Thresholds, aggregate, to_document
from prober.report.schema.jsonio import write_json
from tests.report.history import KEYS, summary_doc, write_history

SHIFTED = (LB.EXTERNAL, Protocol.HTTP2, Connection.NEW)


def test_binomial_tail_by_hand() -> None:
    # P(X >= 6), X ~ Binomial(10, 1/4): sum over i = 6..10 of C(10, i) 3^(10-i) / 4^10
    by_hand = sum(math.comb(10, i) * 3 ** (10 - i) for i in range(6, 11)) / 4**10
    assert binomial_tail(6, 10, 0.25) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(0.0197277)
    assert binomial_tail(0, 10, 0.25) == 1.0
    assert binomial_tail(11, 10, 0.25) == 0.0
    assert binomial_tail(1, 10, 0.25) == pytest.approx(1 - 0.75**10)


def test_holm_step_down() -> None:
    # sorted: 0.005 <= .05/4, 0.01 <= .05/3, 0.03 > .05/2: stop there
    assert holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert holm([], 0.05) == []


def test_one_noisy_run_does_not_fail_the_gate_and_a_real_shift_does() -> None:
    history = 74.25  # P75 of 0..99
    noisy = exceedance_test([50.0] * 9 + [10_000.0], history, 0.75)
    assert (noisy.k, noisy.n) == (1, 10)
    assert noisy.p_value == pytest.approx(1 - 0.75**10)  # 0.94: nothing unusual
    shifted = exceedance_test([80.0] * 7 + [60.0] * 3, history, 0.75)
    assert shifted.k == 7
    assert shifted.p_value == pytest.approx(0.0035057, rel=1e-4)


def _run(rng: random.Random, run_id: str, scale_of) -> RunFacts:
    """One run: every key's reaction and disruption drawn from a log-normal distribution."""
    worst = tuple(
        WorstOfRun(
            key,
            scale_of(key) * rng.lognormvariate(1.0, 0.5),
            scale_of(key) * rng.lognormvariate(0.0, 0.8),
        )
        for key in KEYS
    )
    return RunFacts("mem", run_id, "aws", 3, worst)


def _trial(rng: random.Random, shift: float) -> list:
    history = [_run(rng, f"h{i}", lambda key: 1.0) for i in range(200)]
    thresholds = Thresholds(aggregate(history, min_runs=100))
    recent = [_run(rng, f"n{i}", lambda key: shift if key == SHIFTED else 1.0) for i in range(10)]
    return check_regression(recent, thresholds)


def test_the_false_positive_rate_over_all_keys_stays_under_alpha() -> None:
    rng = random.Random(20261130)
    trials = 200
    flagged = sum(any(r.regressed for r in _trial(rng, 1.0)) for _ in range(trials))
    # 32 keys tested per trial; Holm keeps the chance of any false alarm at or below 5 %.
    # The binomial bound on 200 trials at 5 % puts 19 flagged trials at its 99.7th percentile.
    assert flagged <= 19


def test_a_tripling_of_one_key_is_found_and_only_that_key() -> None:
    rng = random.Random(7)
    trials = 50
    found = wrong = 0
    for _ in range(trials):
        results = _trial(rng, 3.0)
        found += any(r.regressed and r.key == SHIFTED for r in results)
        wrong += sum(r.regressed and r.key != SHIFTED for r in results)
    # log-normal(1, 0.5) tripled: a run's reaction exceeds the old P75 with probability 0.94;
    # under Holm over 32 keys the first rejection needs 8 of 10: P(K >= 8) = 0.97.
    assert found >= 0.9 * trials
    assert wrong <= 2


def test_keys_without_usable_history_are_not_tested() -> None:
    rng = random.Random(1)
    history = Thresholds(aggregate([_run(rng, f"h{i}", lambda k: 1.0) for i in range(50)], 100))
    results = check_regression([_run(rng, "n", lambda k: 5.0)], history)
    assert all(r.test is None and not r.regressed for r in results)
    assert results[0].history.startswith("no usable history for aws internal-lb/http1/new")


def _write(directory: Path, docs) -> list[Path]:
    return write_history(directory, docs)


def test_the_check_command_gates_with_exit_1(tmp_path: Path, capsys) -> None:
    history = [
        summary_doc(f"h{i}", "aws", lambda k, i=i: float(i), lambda k: 0.0) for i in range(100)
    ]
    thresholds = tmp_path / "thresholds.json"
    write_json(thresholds, to_document(aggregate(_facts(tmp_path / "h", history), 100)))
    calm = [summary_doc(f"c{i}", "aws", lambda k: 50.0, lambda k: 0.0) for i in range(9)]
    calm.append(summary_doc("c9", "aws", lambda k: 10_000.0, lambda k: 0.0))
    out = tmp_path / "calm-out"
    paths = _write(tmp_path / "calm", calm)
    assert (
        main(["thresholds", "--check", str(thresholds), *map(str, paths), "--out", str(out)]) == 0
    )
    regression = json.loads((out / "regression.json").read_text())
    assert regression["quantile"] == "p75"
    assert not any(r["regressed"] for r in regression["results"])
    slow = [summary_doc(f"s{i}", "aws", lambda k: 80.0, lambda k: 0.0) for i in range(10)]
    paths = _write(tmp_path / "slow", slow)
    out = tmp_path / "slow-out"
    assert (
        main(["thresholds", "--check", str(thresholds), *map(str, paths), "--out", str(out)]) == 1
    )
    printed = capsys.readouterr().out
    assert "REGRESSED" in printed
    row = next(
        r
        for r in json.loads((out / "regression.json").read_text())["results"]
        if r["metric"] == "reaction"
    )
    assert (row["runs"], row["exceeding"], row["threshold"]) == (10, 10, 74.25)
    assert row["p_value"] == pytest.approx(0.25**10)
    assert row["history"] == "P75 of 100 aws runs"


def _facts(directory: Path, docs) -> list[RunFacts]:
    from prober.report.history.history import load_run_facts

    return [load_run_facts(p) for p in _write(directory, docs)]
