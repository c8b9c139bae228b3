"""`Follower.poll` across appends, partial lines, rotation, compression, truncation, restarts.

Every scenario ends by checking the follower's counts against `summarize` over the same
files: a line read twice or skipped would show there.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from pathlib import Path

import pytest

from prober.audit.event import user_agent_product
from prober.audit.files import discover
from prober.audit.follow import MAX_USER_AGENT_LABELS, Follower, user_agent_label
from prober.audit.state import load_state, save_state
from prober.audit.summary import summarize
from tests.support.auditlog import OPERATOR, PROBER, append, event, graceful, line, rotate, shutdown

Counts = tuple[int, dict[str, int], dict[str, int]]


def follower(directory: Path, state_path: Path | None = None) -> Follower:
    families, _ = discover([directory], node="master-0")
    state = load_state(state_path) if state_path else None
    return Follower(families, state, max_line_bytes=4096)


def followed(f: Follower) -> Counts:
    counts = f.state.counts["master-0"]
    return counts.stats.events, dict(counts.stats.bad), dict(counts.late)


def summarized(directory: Path) -> Counts:
    families, _ = discover([directory], node="master-0")
    summary = summarize(families, max_line_bytes=4096)
    late: Counter[str] = Counter()
    for key, arrivals in summary.late.items():
        late[user_agent_product(key[1])] += arrivals.count
    return summary.stats.events, dict(summary.stats.bad), dict(late)


def late(t: float, agent: str = PROBER) -> bytes:
    return line(event(t, user_agent=agent, annotations=graceful()))


def plain(t: float) -> bytes:
    return line(event(t))


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    directory = tmp_path / "kube-apiserver"
    directory.mkdir()
    (directory / "audit.log").write_bytes(b"")
    return directory


def test_it_reads_what_was_appended_since_the_last_poll(logdir: Path):
    f = follower(logdir)
    append(logdir / "audit.log", plain(1), late(2))
    assert f.poll().lines == 2
    append(logdir / "audit.log", late(3, OPERATOR), plain(4), late(5))
    report = f.poll()
    assert report.lines == 3
    assert report.late == {
        ("master-0", "prober"): 1,
        ("master-0", "cluster-kube-apiserver-operator"): 1,
    }
    assert f.poll().lines == 0
    assert followed(f) == (5, {}, {"prober": 2, "cluster-kube-apiserver-operator": 1})
    assert followed(f) == summarized(logdir)


def test_a_partial_line_waits_for_its_newline_and_counts_once(logdir: Path):
    f = follower(logdir)
    whole = late(1)
    append(logdir / "audit.log", plain(0), whole[:40])
    assert f.poll().lines == 1
    assert f.poll().lines == 0
    append(logdir / "audit.log", whole[40:])
    assert f.poll().lines == 1
    assert followed(f) == (2, {}, {"prober": 1}) == summarized(logdir)


def test_rotation_while_following_loses_nothing_and_repeats_nothing(logdir: Path):
    f = follower(logdir)
    append(logdir / "audit.log", plain(1), late(2))
    f.poll()
    append(logdir / "audit.log", late(3), plain(4))  # written, not yet read, then rotated
    rotate(logdir, "2026-05-01T10-00-00.000")
    append(logdir / "audit.log", late(5))
    assert f.poll().lines == 3
    assert followed(f) == (5, {}, {"prober": 3}) == summarized(logdir)


def test_several_rotations_and_compression_between_two_polls(logdir: Path):
    f = follower(logdir)
    append(logdir / "audit.log", plain(1))
    f.poll()
    append(logdir / "audit.log", late(2))
    rotate(logdir, "2026-05-01T10-00-00.000", compress=True)
    append(logdir / "audit.log", late(3), plain(4))
    rotate(logdir, "2026-05-01T10-01-00.000", compress=True)
    append(logdir / "audit.log", late(5))
    rotate(logdir, "2026-05-01T10-02-00.000")  # not compressed yet
    append(logdir / "audit.log", plain(6))
    assert f.poll().lines == 5
    assert followed(f) == (6, {}, {"prober": 3}) == summarized(logdir)
    assert f.poll().lines == 0


def test_a_half_compressed_rotation_is_read_once(logdir: Path):
    """lumberjack writes x.log.gz before it removes x.log: both exist for a while."""
    f = follower(logdir)
    append(logdir / "audit.log", plain(1), late(2))
    f.poll()
    append(logdir / "audit.log", late(3))
    rotated = rotate(logdir, "2026-05-01T10-00-00.000")
    compressed = logdir / (rotated.name + ".gz")
    compressed.write_bytes(gzip.compress(rotated.read_bytes())[:20])  # being written
    f.poll()
    compressed.write_bytes(gzip.compress(rotated.read_bytes()))
    rotated.unlink()
    append(logdir / "audit.log", plain(4))
    f.poll()
    assert followed(f) == (4, {}, {"prober": 2}) == summarized(logdir)


def test_truncation_starts_the_file_again(logdir: Path):
    f = follower(logdir)
    append(logdir / "audit.log", plain(1), late(2), plain(3))
    f.poll()
    (logdir / "audit.log").write_bytes(late(10))  # truncated and written again, same inode
    report = f.poll()
    assert report.lines == 1
    assert report.problems == [f"{logdir / 'audit.log'}: file truncated; reading it from its start"]
    assert f.state.family(f.families[0].key).truncations == 1
    assert followed(f) == (4, {}, {"prober": 2})


def test_a_restart_resumes_from_the_saved_position(logdir: Path, tmp_path: Path):
    state = tmp_path / "state.json"
    f = follower(logdir, state)
    append(logdir / "audit.log", plain(1), late(2), late(3)[:30])
    f.poll()
    save_state(f.state, state)
    # While it is down: the line completes, the log rotates and is compressed, more comes.
    append(logdir / "audit.log", late(3)[30:], plain(4))
    rotate(logdir, "2026-05-01T10-00-00.000", compress=True)
    append(logdir / "audit.log", late(5))
    again = follower(logdir, state)
    assert again.poll().lines == 3
    assert followed(again) == (5, {}, {"prober": 3}) == summarized(logdir)


def test_a_restart_counts_a_request_once_across_its_stages(logdir: Path, tmp_path: Path):
    state = tmp_path / "state.json"
    f = follower(logdir, state)
    started = event(1, stage="ResponseStarted", aid="watch-1", annotations=graceful())
    append(logdir / "audit.log", line(started))
    f.poll()
    save_state(f.state, state)
    done = event(1, stage="ResponseComplete", aid="watch-1", annotations=graceful())
    append(logdir / "audit.log", line(done))
    again = follower(logdir, state)
    again.poll()
    assert followed(again) == (2, {}, {"kubelet": 1}) == summarized(logdir)


def test_a_file_deleted_before_it_was_finished_is_reported(logdir: Path, tmp_path: Path):
    state = tmp_path / "state.json"
    f = follower(logdir, state)
    append(logdir / "audit.log", plain(1))
    f.poll()
    save_state(f.state, state)
    append(logdir / "audit.log", late(2))
    rotate(logdir, "2026-05-01T10-00-00.000").unlink()  # rotated and deleted while down
    append(logdir / "audit.log", plain(3))
    again = follower(logdir, state)
    report = again.poll()
    assert report.lines == 1
    assert "is gone (deleted before it was finished)" in report.problems[0]
    assert again.state.family(again.families[0].key).lost == 1


def test_a_missing_directory_is_reported_and_followed_when_it_comes_back(logdir: Path):
    f = follower(logdir)
    append(logdir / "audit.log", plain(1))
    f.poll()
    (logdir / "audit.log").unlink()
    logdir.rmdir()
    report = f.poll()
    assert report.problems == [f"{logdir}: directory is missing"]
    assert f.poll().problems == []  # said once, not every poll
    logdir.mkdir()
    append(logdir / "audit.log", late(2))
    report = f.poll()
    assert report.problems[0] == f"{logdir}: directory is back"
    assert report.lines == 1
    assert f.state.problems == 2 + 1  # the two above, and the position lost with the file


def test_bad_lines_are_counted_even_across_polls_and_restarts(logdir: Path, tmp_path: Path):
    state = tmp_path / "state.json"
    f = follower(logdir, state)
    append(logdir / "audit.log", b"garbage\n", b"{" + b"x" * 3000)  # a long line begins
    f.poll()
    append(logdir / "audit.log", b"y" * 3000)  # ... and is now over the limit
    f.poll()
    save_state(f.state, state)
    again = follower(logdir, state)
    append(logdir / "audit.log", b"z" * 10 + b"\n", late(1))
    again.poll()
    assert followed(again) == (1, {"not_json": 1, "too_long": 1}, {"prober": 1})
    assert followed(again) == summarized(logdir)


def test_user_agent_labels_stay_bounded():
    known: Counter[str] = Counter({f"agent{i}": 1 for i in range(MAX_USER_AGENT_LABELS)})
    assert user_agent_label("agent3/1.0", known) == "agent3"
    assert user_agent_label("newcomer/1.0", known) == "other"


@pytest.mark.parametrize("seed", range(12))
def test_random_histories_count_exactly_like_summarize(tmp_path: Path, seed: int):
    """Appends, partial writes, rotations (some compressed, some half-way), polls and
    restarts in a random order: the follower ends with summarize's counts."""
    rng = random.Random(seed)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (logdir / "audit.log").write_bytes(b"")
    state = tmp_path / "state.json"
    f = follower(logdir, state)
    pending = b""
    minute = 0
    for step in range(40):
        op = rng.choice(["append", "append", "append", "partial", "poll", "poll", "rotate",
                         "restart", "garbage"])  # fmt: skip
        if op == "append":
            lines = [late(step, rng.choice([PROBER, OPERATOR])) if rng.random() < 0.4
                     else plain(step) for _ in range(rng.randint(1, 4))]  # fmt: skip
            append(logdir / "audit.log", pending + b"".join(lines))
            pending = b""
        elif op == "partial" and not pending:
            whole = late(step)
            cut = rng.randint(1, len(whole) - 1)
            append(logdir / "audit.log", whole[:cut])
            pending = whole[cut:]
        elif op == "garbage":
            append(logdir / "audit.log", pending + rng.choice([b"\x00\xff\n", b"{nope\n", b"\n"]))
            pending = b""
        elif op == "poll":
            f.poll()
        elif op == "rotate" and not pending:
            minute += 1
            rotate(logdir, f"2026-05-01T10-{minute:02d}-00.000", compress=rng.random() < 0.5)
        elif op == "restart":
            save_state(f.state, state)
            f = follower(logdir, state)
    append(logdir / "audit.log", pending)
    f.poll()
    assert followed(f) == summarized(logdir)
    assert f.poll().lines == 0


def test_follow_shares_summarize_annotation_rules(logdir: Path):
    append(
        logdir / "audit.log",
        line(event(1, annotations=shutdown(late=False))),
        line(event(2, annotations=shutdown(threshold=90, late=None))),
        line(event(3, annotations={"apiserver.k8s.io/shutdown": "broken"})),
    )
    f = follower(logdir)
    f.poll()
    assert f.state.counts["master-0"].stats.invalid_annotations == 1
    assert followed(f) == (3, {}, {"kubelet": 1}) == summarized(logdir)
