"""The kubelet's container logs as the upgrade lab keeps them: CRI lines, rotation at a size,
one dead container kept, a deleted pod's logs gone; `oc logs` reads the newest file only."""

from __future__ import annotations

from pathlib import Path

from prober.lab.infra.kubelet import PodLogs

NOW = 1_796_112_000.0  # 2026-12-01T08:00:00Z


def pod(tmp_path: Path, max_size: int = 1024) -> PodLogs:
    logs = PodLogs(tmp_path / "pods", "prober", "prober-master-1", "uid-1")
    logs.max_size = max_size
    return logs


def test_lines_are_written_as_cri_o_writes_them(tmp_path: Path) -> None:
    logs = pod(tmp_path)
    container = logs.start_container()
    container.write("stdout", b'{"v":1,"kind":"run"}\n', NOW)
    container.write("stderr", b"warning\n", NOW + 0.5)
    assert logs.directory == tmp_path / "pods" / "prober_prober-master-1_uid-1" / "prober"
    assert logs.read_current() == (
        b'2026-12-01T08:00:00.000000Z stdout F {"v":1,"kind":"run"}\n'
        b"2026-12-01T08:00:00.500000Z stderr F warning\n"
    )


def test_past_the_size_only_the_newest_file_is_read(tmp_path: Path) -> None:
    logs = pod(tmp_path, max_size=200)
    container = logs.start_container()
    for index in range(20):
        container.write("stdout", f"line {index:02d} ".encode() + b"x" * 40, NOW + index)
    current = logs.read_current()
    assert current is not None
    assert len(current) <= 200
    assert current.endswith(b"line 19 " + b"x" * 40 + b"\n")
    assert b"line 00" not in current
    assert container.rotations > 0
    assert container.written > 20 * 40
    # containerLogMaxFiles: the live file and at most four rotated ones stay on the node.
    assert len(list(logs.directory.iterdir())) == 5


def test_a_restart_keeps_one_previous_container(tmp_path: Path) -> None:
    logs = pod(tmp_path)
    for restart in range(3):
        logs.start_container().write("stdout", f"container {restart}".encode(), NOW + restart)
    assert logs.read_current() is not None
    assert b"container 2" in (logs.read_current() or b"")
    assert b"container 1" in (logs.read_previous() or b"")
    assert sorted(p.name for p in logs.directory.iterdir()) == ["1.log", "2.log"]


def test_a_deleted_pod_takes_its_logs(tmp_path: Path) -> None:
    logs = pod(tmp_path)
    logs.start_container().write("stdout", b"measured", NOW)
    logs.delete()
    assert logs.read_current() is None
    assert logs.read_previous() is None
    assert not logs.directory.parent.exists()
