"""A node drain's eviction of the daemon: SIGKILL inside the first shutdown window, and a
replacement with its own event log (`judges.podlogs` judges what the pod logs kept)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import yaml

from prober.lab.infra.daemons import DAEMON, Enter, daemon_logs, start_daemon, wait_ready
from prober.lab.infra.processes import ManagedProcess, ProcessGroup

EVICT_AT = 0.3  # of the first shutdown's delay: inside its window, well before its end


async def evict(
    group: ProcessGroup,
    daemon: ManagedProcess,
    config: dict[str, object],
    out: Path,
    enter: Enter | None = None,
) -> tuple[ManagedProcess, int]:
    """Kill `daemon`; start its replacement, ready to sample, with its own event log. The
    kill's wall time goes to OUT/killed.json, for what a reader of the killed log can hold
    its abrupt end against."""
    daemon.send_signal(signal.SIGKILL)
    # Read after the signal: before it, the daemon may still write a record (on a busy
    # machine, after the file write below), later than a `wall` read first would say.
    (out / "killed.json").write_text(json.dumps({"wall": time.time()}) + "\n")
    await daemon.wait(10)
    generation = len(daemon_logs(group.log_dir)) + 1
    replacement = {**config, "event_log": str(out / f"events-{generation}.jsonl")}
    path = out / f"prober-{generation}.yaml"
    path.write_text(yaml.safe_dump(replacement, sort_keys=False))
    new, port = await start_daemon(group, f"{DAEMON}-{generation}", path, enter=enter)
    await wait_ready(new)
    return new, port
