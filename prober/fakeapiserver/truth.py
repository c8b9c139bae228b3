"""Ground truth: what the server did and when, for checking what the prober measured.

The records are `core.truthlog`'s, one JSON line each through the event log's codec
(`core.eventlog.encode`); the writer stamps each with this server and the instant. Who writes
what: `server.py` `listening`, the startup instants, every lifecycle signal by its upstream
name, the connections' opening, GOAWAY and close, and at the process's end
`retry_after_total`; `connection.py` `protocol_error` and `peer_goaway`; `app.py`
`LateConnections`; `early.py` `early_answer`; `watches.py` the watches; `storage.py` the
Lease writes and compactions.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, TypeVar

from prober.common.clock import Clock
from prober.core.eventlog import encode
from prober.core.truthlog import TruthRecord, stamp

R = TypeVar("R", bound=TruthRecord)


class TruthLog:
    """Writes ground-truth records; with no path it only keeps them in memory for tests."""

    def __init__(
        self, path: Path | None, clock: Clock, host: str, apiserver: str, keep: bool = False
    ) -> None:
        self._clock = clock
        self._host, self._apiserver = host, apiserver
        self._file: IO[bytes] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # Open for the server's whole life; closed by `close()`. Unbuffered: each record
            # is one write(2) to an O_APPEND file, so a SIGKILL (the crash scenario) never
            # leaves half a line for the restarted server to append to.
            self._file = Path(path).open("ab", buffering=0)  # noqa: SIM115
        self.records: list[TruthRecord] | None = [] if keep else None

    def write(self, record: R, *, mono: float | None = None, wall: float | None = None) -> R:
        """`record` stamped with this server and the instant (now, unless given), written."""
        mono = self._clock.monotonic() if mono is None else mono
        wall = self._clock.wall() if wall is None else wall
        stamped = stamp(record, host=self._host, apiserver=self._apiserver, wall=wall, mono=mono)
        if self._file is not None:
            self._file.write((encode(stamped) + "\n").encode())
        if self.records is not None:
            self.records.append(stamped)
        return stamped

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
