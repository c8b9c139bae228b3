"""Ground truth: what the server did and when, for checking what the prober measured.

One JSON object per line, each with `event`, `host` (the hostname), `apiserver` (its id),
`wall` (epoch seconds), `ts` (RFC 3339) and `mono` (CLOCK_MONOTONIC seconds, comparable across
processes on one Linux machine). Events: `listening` (with `holder`, the identity Lease's
holder: this process's identity, and the early-ready mode: `early_ready` seconds, 0 when off,
and `early_answer`), `ready` (/readyz went true) and `serving` (it can serve), each with
`holder` (`lifecycle.Startup`), `early_answer` for each request answered before it could
serve (`early.py`), every lifecycle signal by its upstream name (with `trigger` on
ShutdownInitiated), `connection_opened`, `goaway`, `connection_closed`,
`LateConnections`, `protocol_error`, `peer_goaway`; at the process's end,
`retry_after_total` (`codes`: requests refused during shutdown, by status, when there were
any).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from prober.common.clock import Clock
from prober.core.models import rfc3339


class TruthLog:
    """Writes ground-truth records; with no path it only keeps them in memory for tests."""

    def __init__(
        self, path: Path | None, clock: Clock, host: str, apiserver: str, keep: bool = False
    ) -> None:
        self._clock = clock
        self._base = {"host": host, "apiserver": apiserver}
        self._file: IO[bytes] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # Open for the server's whole life; closed by `close()`. Unbuffered: each record
            # is one write(2) to an O_APPEND file, so a SIGKILL (the crash scenario) never
            # leaves half a line for the restarted server to append to.
            self._file = Path(path).open("ab", buffering=0)  # noqa: SIM115
        self.records: list[dict[str, Any]] | None = [] if keep else None

    def record(
        self, event: str, mono: float | None = None, wall: float | None = None, **fields: Any
    ) -> dict[str, Any]:
        mono = self._clock.monotonic() if mono is None else mono
        wall = self._clock.wall() if wall is None else wall
        entry = {"event": event, **self._base, "wall": wall, "ts": rfc3339(wall), "mono": mono}
        entry.update(fields)
        if self._file is not None:
            self._file.write((json.dumps(entry, separators=(",", ":")) + "\n").encode())
        if self.records is not None:
            self.records.append(entry)
        return entry

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
