"""The `delayed-lb` scenario's claim: the delayed LB's request streams, every one, and no
other stream, are slow but up (`core.latency`, summary.json's `latency`)."""

from __future__ import annotations

from dataclasses import dataclass

from prober.core.models import LB, StreamId
from prober.report.results.latency import LatencySection


@dataclass(frozen=True, slots=True)
class Slowness:
    problems: tuple[str, ...]  # a claim the run broke
    findings: tuple[str, ...]  # each slow-but-up stream, with its comparison


def judge_slowness(section: LatencySection | None, delayed: LB, delay: float) -> Slowness:
    """`delay`: seconds the relay held each chunk, each way, in the windows."""
    if section is None or not section["recorded"]:
        return Slowness(("delayed-lb: the event log has no answer times to judge",), ())
    problems: list[str] = []
    findings: list[str] = []
    for entry in section["streams"]:
        ours = StreamId.parse(entry["stream"]).lb is delayed
        if entry["slow_but_up"]:
            findings.append(f"slow but up: {entry['stream']}: {entry['why']}")
            if not ours:
                problems.append(
                    f"delayed-lb: {entry['stream']} is slow but up, though only {delayed} "
                    f"was delayed: {entry['why']}"
                )
        elif ours:
            problems.append(
                f"delayed-lb: {entry['stream']} is not slow but up, though {delayed} held "
                f"every chunk {delay:g} s each way in the windows: {entry['why']}"
            )
    return Slowness(tuple(problems), tuple(findings))
