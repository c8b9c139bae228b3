"""Synthetic histories: summaries of many runs with known worst values."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prober.core.models import LB, Connection, Protocol

KEYS = [(lb, p, c) for lb in (LB.INTERNAL, LB.EXTERNAL) for p in Protocol for c in Connection]


def summary_doc(
    run_id: str,
    platform: str,
    reaction: Callable[[tuple[LB, Protocol, Connection]], float | None],
    disruption: Callable[[tuple[LB, Protocol, Connection]], float],
    *,
    windows: int = 3,
) -> dict[str, Any]:
    """A summary in the design's shape whose `worst` entries hold the given values."""
    return {
        "v": 1,
        "run_id": run_id,
        "platform": platform,
        "windows": [{"host": f"h{i}"} for i in range(windows)],
        "streams": [],
        "worst": [
            {
                "lb": lb.value,
                "protocol": p.value,
                "connection": c.value,
                "reaction": reaction((lb, p, c)),
                "disruption_seconds": disruption((lb, p, c)),
            }
            for lb, p, c in KEYS
        ],
    }


def write_history(directory: Path, docs: list[dict[str, Any]]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc in docs:
        path = directory / f"{doc['platform']}-{doc['run_id']}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths
