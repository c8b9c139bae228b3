"""Container logs as a node's kubelet and CRI-O keep them, and what `oc logs` can read back.

A container's stdout and stderr go, line by line, into one CRI log file
(`<RFC 3339 nano> stdout|stderr F <line>`) under the pod's directory on its node:
`pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`. Past `max_size` bytes the kubelet
rotates it (the file is renamed `<restart>.log.<stamp>`, a new one started) and keeps at most
`max_files` files of the container; `oc logs` returns the newest file only, and `--previous`
the newest file of the container before the last restart, which is the one dead container the
kubelet keeps. A deleted pod's directory goes with it.

The lab feeds each prober "container" (a daemon process) through a `ContainerLog`; a gather
reads only what `read_current` and `read_previous` give, as `oc logs` would.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024
DEFAULT_MAX_SIZE = 10 * MIB  # containerLogMaxSize, upstream's default (OpenShift: 50 MiB)
DEFAULT_MAX_FILES = 5  # containerLogMaxFiles


def cri_line(stream: str, line: bytes, now: float) -> bytes:
    stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} {stream} F ".encode() + line.rstrip(b"\n") + b"\n"


@dataclass(slots=True)
class ContainerLog:
    """One container's CRI log files, rotated at `max_size`; one instance per restart."""

    directory: Path
    restart: int
    max_size: int = DEFAULT_MAX_SIZE
    max_files: int = DEFAULT_MAX_FILES
    written: int = 0  # bytes the container wrote, whether or not they are still kept
    rotations: int = 0
    _size: int = field(default=0, init=False)

    @property
    def path(self) -> Path:
        return self.directory / f"{self.restart}.log"

    def write(self, stream: str, line: bytes, now: float) -> None:
        record = cri_line(stream, line, now)
        if self._size and self._size + len(record) > self.max_size:
            self._rotate(now)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as sink:
            sink.write(record)
        self._size += len(record)
        self.written += len(record)

    def _rotate(self, now: float) -> None:
        stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y%m%d-%H%M%S.%f")
        self.path.rename(self.directory / f"{self.restart}.log.{stamp}")
        self.rotations += 1
        self._size = 0
        rotated = sorted(self.directory.glob(f"{self.restart}.log.*"))
        for old in rotated[: max(0, len(rotated) - (self.max_files - 1))]:
            old.unlink()


@dataclass(slots=True)
class PodLogs:
    """A pod's container logs on its node: restarts keep one dead container's log."""

    root: Path  # the node's pods/ directory
    namespace: str
    name: str
    uid: str
    container: str = "prober"
    max_size: int = DEFAULT_MAX_SIZE
    current: ContainerLog | None = None
    previous: ContainerLog | None = None
    history: list[ContainerLog] = field(default_factory=list)  # every container, oldest first

    @property
    def directory(self) -> Path:
        return self.root / f"{self.namespace}_{self.name}_{self.uid}" / self.container

    def start_container(self) -> ContainerLog:
        """A new container of the pod (its first, or after a restart)."""
        restart = 0 if self.current is None else self.current.restart + 1
        if self.previous is not None:  # the kubelet keeps the last dead container only
            for old in self.directory.glob(f"{self.previous.restart}.log*"):
                old.unlink()
        self.previous = self.current
        self.current = ContainerLog(self.directory, restart, self.max_size)
        self.history.append(self.current)
        return self.current

    def written_by(self, restart: int) -> ContainerLog:
        return self.history[restart]

    def read_current(self) -> bytes | None:
        """`oc logs POD -c CONTAINER`: the current container's newest file."""
        return _read(self.current)

    def read_previous(self) -> bytes | None:
        """`oc logs --previous`: the newest file of the container before the last restart."""
        return _read(self.previous)

    def delete(self) -> None:
        """The pod is deleted (evicted by a drain, or by hand): its logs go with it."""
        shutil.rmtree(self.directory.parent, ignore_errors=True)
        self.current = self.previous = None


def _read(log: ContainerLog | None) -> bytes | None:
    if log is None or not log.path.exists():
        return None
    return log.path.read_bytes()
