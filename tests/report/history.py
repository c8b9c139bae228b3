"""Synthetic histories: summaries of many runs with known worst values."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prober.core.models import LB, Connection, Protocol
from prober.report.history.history import load_run_facts
from prober.report.history.thresholds import aggregate, to_document
from prober.report.results.summary import SUMMARY_VERSION
from prober.report.schema.jsonio import write_json

KEYS = [(lb, p, c) for lb in (LB.INTERNAL, LB.EXTERNAL) for p in Protocol for c in Connection]


def summary_doc(
    run_id: str,
    platform: str,
    reaction: Callable[[tuple[LB, Protocol, Connection]], float | None],
    disruption: Callable[[tuple[LB, Protocol, Connection]], float],
    *,
    windows: int = 3,
    version: int = SUMMARY_VERSION,
) -> dict[str, Any]:
    """A summary in the design's shape whose `worst` entries hold the given values; from
    version 2 on, each reaction with a bound 0.25 s below and 0.5 s above it."""
    worst = []
    for lb, protocol, connection in KEYS:
        value = reaction((lb, protocol, connection))
        entry: dict[str, Any] = {
            "lb": lb.value,
            "protocol": protocol.value,
            "connection": connection.value,
            "reaction": value,
        }
        if version >= 2:
            entry["reaction_lo"] = None if value is None else value - 0.25
            entry["reaction_hi"] = None if value is None else value + 0.5
        entry["disruption_seconds"] = disruption((lb, protocol, connection))
        worst.append(entry)
    return {
        "v": version,
        "run_id": run_id,
        "platform": platform,
        "windows": [window(f"h{i}") for i in range(windows)],
        "streams": [],
        "worst": worst,
    }


def window(host: str) -> dict[str, Any]:
    """A shutdown window as a summary holds one: every reader checks every field."""
    return {"host": host, "node": None, "delay": 70.0, "t0": 10.0, "t0_lo": 9.9, "t0_hi": 10.1,
            "closed_by": "recovered", "streams": []}  # fmt: skip


def write_history(directory: Path, docs: list[dict[str, Any]]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc in docs:
        path = directory / f"{doc['platform']}-{doc['run_id']}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def history_thresholds(tmp_path: Path, platform: str = "aws") -> Path:
    """100 runs where every reaction was 1..5 s (P99 5 s: allowed 5 s), and the external LB's
    reused connections reacted in 25 s with 10 s of disruption (allowed 25 s and 10 s)."""

    def reaction(key, i: int) -> float:
        return 25.0 if key[0] is LB.EXTERNAL and key[2] is Connection.REUSED else 1 + i % 5

    def disruption(key) -> float:
        return 10.0 if key[0] is LB.EXTERNAL and key[2] is Connection.REUSED else 0.0

    docs = [
        summary_doc(f"r{i}", platform, lambda key, i=i: reaction(key, i), disruption)
        for i in range(100)
    ]
    paths = write_history(tmp_path / "history", docs)
    entries = aggregate([load_run_facts(p) for p in paths], min_runs=100)
    out = tmp_path / "thresholds.json"
    write_json(out, to_document(entries))
    return out
