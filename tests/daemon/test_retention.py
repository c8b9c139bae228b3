"""Earlier runs' directories: only the prober's own are pruned, oldest first by the start time
their marker records, never the run just moved aside nor the newest earlier run, within a
count and a byte budget; each pruning is logged with what went and why (issue 33)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from structlog.testing import capture_logs

from prober.common.segments import read_lines
from prober.config.model import Config
from prober.core.eventlog import EventLogReader
from prober.core.models import REQUEST, RunRecord, rfc3339
from prober.daemon import retention
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.retention import MARKER, Aside, Retention, plan

NOW = time.time()
EARLIER = RunRecord(
    "earlier-run-0000",
    rfc3339(NOW - 600),
    "aws",
    "0",
    {REQUEST: ("a-http1-localhost-new-connections",)},
)
THIS = dataclasses.replace(EARLIER, run_id="this-run-0000", ts=rfc3339(NOW))


def stamp(offset: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(NOW + offset))


def own(tmp_path: Path, name: str, started: float, size: int = 100) -> Path:
    """A directory as the prober leaves one: the earlier run's log and the marker."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "events.jsonl").write_bytes(b"x" * size)
    assert retention.mark(Aside(directory, f"run-{name[-12:]}", started, size), started + 1.0)
    return directory


def foreign(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "events.jsonl").write_text(f"kept by someone: {name}\n")
    return directory


def earlier_log(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    writer = EventLogWriter(str(path), 1 << 20, EARLIER)
    writer.open()
    writer.close()
    return path


def start(path: Path, keep: Retention | None = None) -> tuple[Path | None, list[dict]]:
    """Start this run beside what is there; returns the directory the earlier run moved to."""
    before = set(path.parent.glob("events.jsonl.previous-*"))
    with capture_logs() as logs:
        writer = EventLogWriter(str(path), 1 << 20, THIS, keep=keep)
        writer.open()
        writer.close()
    new = [p for p in path.parent.glob("events.jsonl.previous-*") if p not in before]
    assert len(new) <= 1
    return (new or [None])[0], logs


def moved_by(path: Path, keep: Retention | None = None) -> tuple[Path, list[dict]]:
    moved, logs = start(path, keep)
    assert moved is not None
    return moved, logs


def run_ids(directory: Path) -> list[str]:
    records = EventLogReader(read_lines(directory / "events.jsonl"))
    return [r.run_id for r in records if isinstance(r, RunRecord)]


def test_sixty_foreign_directories_are_never_touched(tmp_path: Path) -> None:
    """Names sorting before and after this run's: none carries the marker, none is pruned."""
    names = [f"events.jsonl.previous-{stamp(offset)}-other{n:03d}" for n, offset in
             enumerate(range(-30, 30))]  # fmt: skip
    names[:5] = [f"events.jsonl.previous-0000-{n}" for n in range(5)]  # before any stamp
    names[-5:] = [f"events.jsonl.previous-zzzz-{n}" for n in range(5)]  # after every stamp
    path = earlier_log(tmp_path)  # first: its own start prunes what is there
    dirs = [foreign(tmp_path, name) for name in names]
    moved, logs = moved_by(path)
    for directory in dirs:
        assert (directory / "events.jsonl").read_text() == f"kept by someone: {directory.name}\n"
    assert run_ids(moved) == [EARLIER.run_id]
    assert (moved / MARKER).is_file()
    assert not [e for e in logs if e["event"] == "event_log_previous_run_pruned"]


def test_a_clock_stepped_back_costs_neither_the_run_moved_aside_nor_the_newest(
    tmp_path: Path,
) -> None:
    """63 of the prober's own directories stamped 3 s before now to 59 s after, as a clock
    stepped back leaves them: this run's name sorts before most, and its earlier run started
    before all of them. Pruned are the oldest by start time, keeping the count."""
    path = earlier_log(tmp_path)
    dirs = [own(tmp_path, f"events.jsonl.previous-{stamp(s)}-run{s + 3:05d}", NOW + s)
            for s in range(-3, 60)]  # fmt: skip
    moved, logs = moved_by(path)
    kept = sorted(p for p in tmp_path.glob("events.jsonl.previous-*"))
    assert kept == sorted([moved, *dirs[-4:]])  # the newest four and the run just moved
    assert run_ids(moved) == [EARLIER.run_id]
    pruned = [e for e in logs if e["event"] == "event_log_previous_run_pruned"]
    assert [e["path"] for e in pruned] == [str(d) for d in dirs[:-4]]  # oldest first
    assert pruned[0]["reason"] == "64 earlier runs, keep 5"
    assert pruned[0]["started"] == rfc3339(NOW - 3)
    assert pruned[-1]["reason"] == "6 earlier runs, keep 5"


def test_own_and_foreign_mixed_only_own_are_counted_and_pruned(tmp_path: Path) -> None:
    path = earlier_log(tmp_path)
    others = [foreign(tmp_path, f"events.jsonl.previous-{stamp(n)}-x{n:02d}") for n in range(30)]
    mine = [own(tmp_path, f"events.jsonl.previous-{stamp(-n)}-m{n:02d}", NOW - 1000 - n)
            for n in range(30)]  # fmt: skip
    moved, _ = moved_by(path, Retention(runs=3, size=1 << 30))
    assert all(d.exists() for d in others)
    # mine[0] started last of them (the newest earlier run); the earlier run, 600 s ago, is
    # newer still, and just moved aside.
    assert sorted(d for d in mine if d.exists()) == sorted(mine[:2])
    assert moved.exists()


def test_equal_start_times_prune_in_name_order_and_keep_the_protected() -> None:
    asides = [Aside(Path(f"/x/p.previous-{n}"), f"r{n}", 100.0, 10) for n in "dacb"]
    going = plan(asides, Path("/x/p.previous-a"), Retention(runs=2, size=1 << 20))
    # Name order a, b, c, d at one start time: d is the newest, a was just moved.
    assert [(a.path.name, why) for a, why in going] == [
        ("p.previous-b", "4 earlier runs, keep 2"),
        ("p.previous-c", "3 earlier runs, keep 2"),
    ]


def test_the_byte_budget_prunes_oldest_first_and_keeps_the_newest_whatever_its_size(
    tmp_path: Path,
) -> None:
    old = [own(tmp_path, f"events.jsonl.previous-old{n}", NOW - 5000 + n, 1000) for n in range(3)]
    big = own(tmp_path, "events.jsonl.previous-big", NOW - 100, 50_000)
    _, logs = start(tmp_path / "events.jsonl", Retention(runs=10, size=10_000))  # nothing moved
    assert not any(d.exists() for d in old)
    assert big.exists()
    pruned = [e for e in logs if e["event"] == "event_log_previous_run_pruned"]
    assert pruned[0]["reason"] == "earlier runs take 53000 bytes, keep 10000"
    (over,) = [e for e in logs if e["event"] == "event_log_previous_runs_over_budget"]
    assert (over["kept"], over["bytes"]) == ([str(big)], 50_000)


def test_an_unreadable_marker_or_a_symlink_is_kept(tmp_path: Path) -> None:
    path = earlier_log(tmp_path)
    broken = own(tmp_path, "events.jsonl.previous-broken", NOW - 9000)
    (broken / MARKER).write_text("{not json")
    target = own(tmp_path, "elsewhere", NOW - 8000)
    (tmp_path / "events.jsonl.previous-link").symlink_to(target)
    _, logs = start(path, Retention(runs=1, size=1 << 20))
    assert broken.exists()
    assert target.exists()
    (warned,) = [e for e in logs if e["event"] == "event_log_previous_run_marker_unreadable"]
    assert warned["path"] == str(broken)


def test_the_marker_records_the_earlier_runs_own_start(tmp_path: Path) -> None:
    moved, _ = moved_by(earlier_log(tmp_path))
    ((aside,), _) = retention.own_asides(tmp_path / "events.jsonl")
    assert aside.path == moved
    assert (aside.run_id, rfc3339(aside.started)) == (EARLIER.run_id, EARLIER.ts)
    assert aside.size == (moved / "events.jsonl").stat().st_size


def test_a_log_without_a_run_record_is_dated_by_its_file_time(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("torn")
    moved, _ = moved_by(path)
    ((aside,), _) = retention.own_asides(path)
    assert (aside.path, aside.run_id) == (moved, "")
    # As the marker records it: RFC 3339, to the microsecond.
    assert rfc3339(aside.started) == rfc3339((moved / "events.jsonl").stat().st_mtime)


def test_the_config_defaults_are_the_writers() -> None:
    config = Config()
    assert Retention() == Retention(config.event_log_keep_runs, config.event_log_keep_size)
