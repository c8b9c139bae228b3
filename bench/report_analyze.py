"""How long `prober analyze` takes on a 4-hour event log, against just decoding that log.

The log is the one `bench/daemon_eventlog_size.py` makes: a synthetic 4-hour upgrade-like run
at the in-cluster defaults (12 streams at 20 samples/s, 12 shutdown windows) fed through the
daemon's real `SampleFeed` and `EventLogWriter` (compaction, rotation, gzip segments). Baseline:
reading every line of it with the core's `EventLogReader` (decompression and JSON decoding,
which any analysis pays). Measured: the whole analysis (read, replay through the trackers,
summary, verdicts, and writing summary.json, junit.xml and report.html), its ratio to the
baseline, the report's size, and whether the replay reproduced every daemon record.

    .venv/bin/python bench/report_analyze.py [--hours 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prober.core.eventlog import EventLogReader
from prober.report.analyze import analyze_runs, write_outputs
from prober.report.replay.eventfiles import LineSource, log_files

ROOT = Path(__file__).resolve().parents[1]


def _log_maker():  # the daemon's own benchmark builds the log; one generator for both figures
    spec = importlib.util.spec_from_file_location(
        "eventlog_size", ROOT / "bench" / "daemon_eventlog_size.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def decode_only(path: Path) -> int:
    records = 0
    for file in log_files(path):
        records += sum(1 for _ in EventLogReader(LineSource(file), source=str(file)))
    return records


def best_of(runs: int, work) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.process_time()
        result = work()
        best = min(best, time.process_time() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=4.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "events.jsonl"
        start = time.monotonic()
        samples, records, size = _log_maker()(log, args.hours)
        print(
            f"log: {args.hours:g} h, {samples} samples, {records} records, "
            f"{len(log_files(log))} files, {size / 2**20:.1f} MiB "
            f"(made in {time.monotonic() - start:.0f} s)"
        )
        decode_s, decoded = best_of(3, lambda: decode_only(log))

        def analyze() -> tuple[int, int]:
            analyses, stats = analyze_runs([log])
            written = write_outputs(analyses[0], stats, Path(tmp) / "out")
            warnings = sum(len(a.warnings) for a in analyses)
            return warnings, written[-1].stat().st_size

        analyze_s, (warnings, html_bytes) = best_of(3, analyze)  # type: ignore[misc]
    print(f"baseline, decode every record ({decoded}): {decode_s:.2f} s CPU")
    print(f"prober analyze (replay, summary, JUnit, HTML): {analyze_s:.2f} s CPU")
    print(f"ratio analyze / decode: {analyze_s / decode_s:.2f}x")
    print(f"report.html: {html_bytes / 1024:.0f} KiB; replay mismatches: {warnings}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (log making included): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
