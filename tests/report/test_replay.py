"""Reading event logs (segments, gzip, directories, bad input) and replaying them."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from prober.core.eventlog import encode
from prober.core.kinds import standard_kinds
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from prober.report.schema.errors import BadInput
from tests.core.test_streamkind import BEATS, WATCH, Beat
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.rollout import NODES, streams


def test_a_rotated_log_replays_to_the_daemons_own_intervals_and_windows(rollout_log) -> None:
    path, live = rollout_log
    assert live.segments >= 2
    runs, stats = load_runs([path])
    assert len(runs) == 1
    assert [p.name for p in stats.files][:2] == ["events.jsonl.000001.gz", "events.jsonl.000002.gz"]
    assert stats.files[-1] == path
    result = replay(runs[0])
    assert result.warnings == ()
    assert list(result.intervals) == live.intervals
    assert list(result.windows) == live.windows
    assert [w.node for w in result.windows] == ["master-0", "master-1", "master-2"]


def test_a_directory_means_every_jsonl_log_in_it(tmp_path: Path, rollout_samples) -> None:
    for name, run_id in (("a.jsonl", "run-a"), ("b.jsonl", "run-b")):
        record = run_record(streams(), run_id=run_id)
        write_daemon_log(tmp_path / name, record, rollout_samples[:500], rotate_bytes=20_000)
    (tmp_path / "notes.txt").write_text("not a log")
    runs, stats = load_runs([tmp_path])
    assert [r.run.run_id for r in runs] == ["run-a", "run-b"]
    assert all(p.name.startswith(("a.jsonl", "b.jsonl")) for p in stats.files)


def test_a_plain_file_with_a_gz_name_and_a_gzip_file_without_one_are_both_read(
    tmp_path: Path, rollout_log
) -> None:
    path, _ = rollout_log
    segment = path.with_name("events.jsonl.000001.gz")
    renamed = tmp_path / "copy.jsonl"
    renamed.write_bytes(segment.read_bytes())  # gzip content, plain name
    runs, _ = load_runs([renamed])
    assert runs[0].run.run_id == "run-1"


def test_a_killed_daemon_leaves_a_note_not_a_mismatch(tmp_path: Path, rollout_samples) -> None:
    path = tmp_path / "events.jsonl"
    cut = [s for s in rollout_samples if s.end < 100.5]  # killed inside B's window
    live = write_daemon_log(path, run_record(streams()), cut, nodes=NODES, clean_end=False)
    (runs, _) = load_runs([path])
    result = replay(runs[0])
    assert len(result.warnings) == 1
    assert "no end-of-run records" in result.warnings[0]
    assert "1 windows still open" in result.warnings[0]
    assert list(result.windows[:1]) == live.windows


def _rewrite(path: Path, edit) -> None:
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(edit(lines)))


def test_a_window_that_does_not_replay_is_a_warning_naming_the_host(
    tmp_path: Path, rollout_samples
):
    path = tmp_path / "events.jsonl"
    write_daemon_log(path, run_record(streams()), rollout_samples, nodes=NODES)

    def shift_t0(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            obj = json.loads(line)
            if obj["kind"] == "window" and obj["host"] == "apiserver-bbbb":
                obj["t0"] += 1.0
            out.append(json.dumps(obj) + "\n")
        return out

    _rewrite(path, shift_t0)
    result = replay(load_runs([path])[0][0])
    assert len(result.warnings) == 1
    assert "host apiserver-bbbb: windows #1 differs from the daemon's: t0" in result.warnings[0]


def test_a_lost_failure_is_a_warning_naming_the_stream(tmp_path: Path, rollout_samples) -> None:
    path = tmp_path / "events.jsonl"
    write_daemon_log(path, run_record(streams()), rollout_samples, nodes=NODES)
    stream = "kube-api-http1-external-lb-reused-connections"

    def drop_first_failure(lines: list[str]) -> list[str]:
        for i, line in enumerate(lines):
            obj = json.loads(line)
            if obj["kind"] == "sample" and obj["stream"] == stream and obj["error"]:
                return lines[:i] + lines[i + 1 :]
        raise AssertionError("no failure logged")

    _rewrite(path, drop_first_failure)
    warnings = replay(load_runs([path])[0][0]).warnings
    assert any(w.startswith(f"{path}: stream {stream}: intervals #1") for w in warnings)


def test_a_restarted_daemon_appending_to_the_same_file_makes_two_runs(
    tmp_path: Path, rollout_samples
) -> None:
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    write_daemon_log(first, run_record(streams(), run_id="r1"), rollout_samples[:300])
    write_daemon_log(second, run_record(streams(), run_id="r2"), rollout_samples[:300])
    first.write_text(first.read_text() + second.read_text())
    runs, _ = load_runs([first])
    assert [r.run.run_id for r in runs] == ["r1", "r2"]
    assert all(replay(r).warnings == () for r in runs)


# Bad input: one line naming the file (and line) and the problem.


def _log_with(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(lines))
    return path


RUN_LINE = encode(run_record(streams())) + "\n"


def test_an_empty_log_is_bad_input(tmp_path: Path) -> None:
    path = _log_with(tmp_path)
    with pytest.raises(BadInput, match=r"^\S+events.jsonl: empty event log \(no records\)$"):
        load_runs([path])


def test_a_log_of_a_newer_schema_version_is_bad_input(tmp_path: Path) -> None:
    newer = RUN_LINE.replace('"v":1', '"v":2')
    path = _log_with(tmp_path, newer)
    with pytest.raises(BadInput) as caught:
        load_runs([path])
    assert str(caught.value) == (
        f"{path}:1: schema version 2, this reader knows 1 (written by a newer prober?)"
    )


def test_a_corrupted_line_is_bad_input_unless_skipping_is_asked_for(tmp_path: Path) -> None:
    path = _log_with(tmp_path, RUN_LINE, '{"v":1,"kind":"sample","t":"soon"}\n', RUN_LINE)
    with pytest.raises(BadInput, match=r"events.jsonl:2: sample: missing field 'ts'$"):
        load_runs([path])
    runs, stats = load_runs([path], skip_bad_lines=True)
    assert len(runs) == 1
    assert stats.skipped == 1
    assert stats.problems == [f"{path}:2: sample: missing field 'ts'"]


def test_a_truncated_last_line_and_unknown_kinds_are_skipped_and_counted(tmp_path: Path) -> None:
    path = _log_with(tmp_path, RUN_LINE, '{"v":1,"kind":"gossip"}\n', RUN_LINE[:30])
    runs, stats = load_runs([path])
    assert len(runs) == 1
    assert (stats.skipped, stats.unknown_kinds, stats.truncated) == (2, 1, 1)


def test_a_gzip_segment_cut_short_is_read_up_to_where_it_ends(rollout_log) -> None:
    path, _ = rollout_log
    segment = path.with_name("events.jsonl.000001.gz")
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])
    whole = gzip.decompress(data).count(b"\n")
    runs, stats = load_runs([segment])
    assert len(runs) == 1
    assert stats.truncated == 1
    assert 2 < stats.lines < whole
    assert stats.problems[-1].endswith("events.jsonl.000001.gz: gzip data ends early")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_bytes(_damaged_gzip()), "damaged gzip data: Error -3 while"),
        (
            lambda p: p.write_text(encode(dataclasses.replace(_window(p), node=None)) + "\n"),
            "events.jsonl:1: a window record before any run record",
        ),
        (lambda p: p.write_text("\n\n"), "empty event log (no usable records in 2 lines)"),
    ],
)
def test_other_bad_logs_are_one_line_errors(tmp_path: Path, setup, message: str) -> None:
    path = tmp_path / "events.jsonl"
    setup(path)
    with pytest.raises(BadInput) as caught:
        load_runs([path])
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_directory_without_logs_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="directory holds no"):
        load_runs([tmp_path])


def _window(path: Path):
    """A window the daemon logged at `path`, which a test then overwrites."""
    from tests.report.rollout import rollout

    samples = rollout(60).samples()
    live = write_daemon_log(path, run_record(streams()), samples, nodes=NODES)
    return live.windows[0]


def _damaged_gzip() -> bytes:
    data = bytearray(gzip.compress(RUN_LINE.encode() * 20))
    data[30:40] = b"\xff" * 10
    return bytes(data)


def test_a_segment_left_plain_by_a_crash_is_read_in_its_place(rollout_log) -> None:
    path, _ = rollout_log
    second = path.with_name("events.jsonl.000002.gz")
    plain = path.with_name("events.jsonl.000002")
    plain.write_bytes(gzip.decompress(second.read_bytes()))
    second.rename(path.with_name("events.jsonl.000002.gz.part"))  # never finished
    runs, stats = load_runs([path])
    assert [p.name for p in stats.files][:3] == [
        "events.jsonl.000001.gz",
        "events.jsonl.000002",
        "events.jsonl.000003.gz",
    ]
    assert replay(runs[0]).warnings == ()
    second.write_bytes(gzip.compress(plain.read_bytes()))  # finished after all: preferred
    _, stats = load_runs([path.parent])
    assert [p.name for p in stats.files][1] == "events.jsonl.000002.gz"
    assert stats.files[-1] == path


def test_records_of_another_kind_of_stream_are_kept_per_kind_through_the_replay(
    tmp_path: Path,
) -> None:
    beats = [Beat(t=1.0, stream_id=WATCH, lag=0.1), Beat(t=2.0, stream_id=WATCH)]
    path = _log_with(tmp_path, RUN_LINE, *(encode(b) + "\n" for b in beats))
    table = standard_kinds()
    table.add(BEATS)
    runs, stats = load_runs([path], kinds=table)
    assert runs[0].others == {"beat": beats}
    assert replay(runs[0]).of_kind("beat") == tuple(beats)
    assert (stats.skipped, stats.unknown_kinds) == (0, 0)
    # A reader that does not know the kind skips its records and says so, as ever.
    runs, stats = load_runs([path])
    assert runs[0].others == {}
    assert (stats.skipped, stats.unknown_kinds) == (2, 2)
