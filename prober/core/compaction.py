"""Which samples the event log must keep so that replaying it reproduces the trackers exactly.

At the default rates the daemon takes hundreds of samples a second, almost all of them plain
successes that change nothing; a 4-hour log of every sample would be gigabytes. The trackers
only depend on:

* every failed, late (`shutdown=true`) or header-less sample: always kept;
* every sample that made a tracker emit something (an interval closed, a window opened or
  timed out, a window recovered): kept, in the same order, so a replay emits the same thing;
* every `shutdown=false` answer from a host whose window is open (it narrows T0): kept;
* per host, the newest-sent `shutdown=false` before a window opens (the lower bound on T0):
  held back and written just before the sample that opened the window, marked `held` so that
  the disruption tracker ignores it on replay: fed that late, a success could close an interval
  it did not close when it arrived.

Everything else is a success that moved no state, and is counted by the `summary` records
instead. `tests/core/test_compaction.py` checks the claim over generated runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from prober.core.models import Sample
from prober.core.shutdown import WindowOpened


class Compactor:
    """Fed each sample after the trackers, with what they emitted; returns what to write."""

    def __init__(self) -> None:
        self._held: dict[str, Sample] = {}

    def select(
        self, sample: Sample, events: Iterable[object], open_hosts: frozenset[str]
    ) -> list[Sample]:
        out: list[Sample] = []
        emitted = False
        for event in events:
            emitted = True
            if isinstance(event, WindowOpened):
                held = self._held.pop(event.host, None)
                if held is not None:
                    out.append(dataclasses.replace(held, held=True))
        header = sample.shutdown
        keep = emitted or sample.error is not None or sample.late
        if header is not None and header.host in open_hosts:
            keep = True
        elif header is not None and not header.shutdown:
            self._note_ready(header.host, sample, kept=keep)
        if keep:
            out.append(sample)
        return out

    def _note_ready(self, host: str, sample: Sample, *, kept: bool) -> None:
        """Remember the newest-sent `shutdown=false` of a host that has no open window."""
        held = self._held.get(host)
        if held is not None and held.t >= sample.t:
            return  # the held one is still the newest
        if kept:
            self._held.pop(host, None)  # the log already has the newest
        else:
            self._held[host] = sample
