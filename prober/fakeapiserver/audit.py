"""The audit trail: `audit.k8s.io/v1` Event objects at level Metadata, one JSON object per line,
rotated by size the way kube-apiserver's lumberjack writer does it
(`audit.log` -> `audit-2006-01-02T15-04-05.000.log`, oldest backups removed beyond a count)."""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prober.core.models import rfc3339
from prober.fakeapiserver.options import User

MEGABYTE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ObjectRef:
    resource: str
    name: str | None = None
    namespace: str | None = None
    api_version: str = "v1"
    api_group: str = ""

    def to_json(self) -> dict[str, str]:
        ref = {"resource": self.resource}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.name:
            ref["name"] = self.name
        if self.api_group:
            ref["apiGroup"] = self.api_group
        ref["apiVersion"] = self.api_version
        return ref


def audit_event(
    *,
    audit_id: str,
    stage: str,
    request_uri: str,
    verb: str,
    user: User | None,
    source_ips: Sequence[str],
    user_agent: str | None,
    object_ref: ObjectRef | None,
    response_status: Mapping[str, Any],
    received_wall: float,
    stage_wall: float,
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """One Event with the fields, order and omissions of the Go struct's JSON encoding."""
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": audit_id,
        "stage": stage,
        "requestURI": request_uri,
        "verb": verb,
        "user": _user(user),
        "sourceIPs": list(source_ips),
    }
    if user_agent:
        event["userAgent"] = user_agent
    if object_ref is not None:
        event["objectRef"] = object_ref.to_json()
    event["responseStatus"] = dict(response_status)
    event["requestReceivedTimestamp"] = _timestamp(received_wall)
    event["stageTimestamp"] = _timestamp(stage_wall)
    if annotations:
        event["annotations"] = dict(annotations)
    return event


_second_cache: list[Any] = [None, ""]


def _timestamp(wall: float) -> str:
    """`rfc3339(wall)` with the date part formatted once per second (it is on the hot path)."""
    second = int(wall // 1)
    micro = round((wall - second) * 1_000_000)
    if micro >= 1_000_000:
        return rfc3339(wall)
    if _second_cache[0] != second:
        _second_cache[:] = [second, rfc3339(second)[:-8]]
    return f"{_second_cache[1]}.{micro:06d}Z"


def _user(user: User | None) -> dict[str, Any]:
    if user is None:  # authentication failed: the apiserver records an empty user
        return {}
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    info["groups"] = list(user.groups)
    return info


def response_status(code: int, failure: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """metav1.Status as audit records it: code only on success, reason and message on failure."""
    status: dict[str, Any] = {"metadata": {}}
    if failure is not None:
        status["status"] = "Failure"
        status["message"] = failure["message"]
        status["reason"] = failure["reason"]
    status["code"] = code
    return status


def backup_name(path: Path, when: float) -> Path:
    """lumberjack's backup name: `<stem>-<UTC 2006-01-02T15-04-05.000><ext>` beside the file."""
    stamp = _dt.datetime.fromtimestamp(when, tz=_dt.UTC)
    text = stamp.strftime("%Y-%m-%dT%H-%M-%S.") + f"{stamp.microsecond // 1000:03d}"
    return path.with_name(f"{path.stem}-{text}{path.suffix}")


class AuditLog:
    """Appends Events, one line each, flushed per line so `tail -f` readers see them at once."""

    def __init__(
        self,
        path: Path,
        max_bytes: int = 100 * MEGABYTE,
        max_backups: int = 10,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.max_backups = max_backups
        self._wall = wall or time.time
        self._file: IO[bytes] = self.path.open("ab")
        self._size = self._file.tell()
        self.rotations = 0

    def write(self, event: Mapping[str, Any]) -> None:
        if self._file.closed:
            return  # the server was killed; what a crashed apiserver did not write is lost
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        if self.max_bytes and self._size and self._size + len(line) > self.max_bytes:
            self._rotate()
        self._file.write(line)
        self._file.flush()
        self._size += len(line)

    def _rotate(self) -> None:
        self._file.close()
        when = self._wall()
        target = backup_name(self.path, when)
        while target.exists():  # two rotations within one millisecond
            when += 0.001
            target = backup_name(self.path, when)
        self.path.rename(target)
        self._file = self.path.open("ab")
        self._size = 0
        self.rotations += 1
        self._remove_old_backups()

    def backups(self) -> list[Path]:
        """Rotated files, oldest first (the timestamp sorts as text)."""
        pattern = f"{self.path.stem}-*{self.path.suffix}"
        return sorted(p for p in self.path.parent.glob(pattern) if p != self.path)

    def _remove_old_backups(self) -> None:
        if not self.max_backups:
            return
        for old in self.backups()[: -self.max_backups]:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        self._file.close()
