"""`GET /readyz` on the direct path (localhost), only while an apiserver restarts: the one T1
signal as tight as the polling a pod can have, for its own node's apiserver
(`core.instances`). A pod on a master's host network reaches it at `https://localhost:6443`;
every other pod has no direct path, and this poller is not started.

It asks at the window gap while the trackers say a restart is under way (a host shut down
and not yet served through every LB again, `Trackers.restarting`) and checks once a quiet
gap otherwise. Each answer becomes a `ReadyzAnswer` record, emitted to the pipeline like a
sample: the event log keeps it, and a replay meets it where the daemon did.
"""

from __future__ import annotations

from collections.abc import Callable

from prober.common.clock import Clock
from prober.core.models import LogRecord, ReadyzAnswer, Sample
from prober.probe import Prober

READYZ_PATH = "/readyz"


def answer_of(sample: Sample) -> ReadyzAnswer:
    """The probe's sample of `/readyz` as the record of it."""
    return ReadyzAnswer(
        t=sample.t,
        ts=sample.ts,
        dur=sample.dur,
        status=sample.status,
        error=sample.error,
        shutdown=sample.shutdown,
        audit_id=sample.audit_id,
    )


class ReadyzPoller:
    def __init__(
        self,
        prober: Prober,
        restarting: Callable[[], bool],
        *,
        fast: float,
        slow: float,
        clock: Clock,
        emit: Callable[[LogRecord], None],
    ) -> None:
        self._prober = prober
        self._restarting = restarting
        self._fast, self._slow = fast, slow
        self._clock = clock
        self._emit = emit

    async def run(self) -> None:
        while True:
            due = self._clock.monotonic() + self._fast
            if self._restarting():
                self._emit(answer_of(await self._prober.sample()))
            else:
                due += self._slow - self._fast
            await self._clock.sleep_until(due)

    async def aclose(self) -> None:
        await self._prober.aclose()
