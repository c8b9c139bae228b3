"""Reading an event-log segment is linear in its size: time per MiB of lines out of a gzip
segment at 16, 64 and 256 MiB, and the ratio of the largest to the smallest (1.0 = linear;
the reader before it: 6.0 / 20.4 / 44.0 ms per MiB at 16 / 64 / 256 MiB, ratio 7.36).

    .venv/bin/python bench/gzip_read.py
"""

from __future__ import annotations

import gzip
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prober.common.segments import SegmentLines

LINE = b'{"v":1,"kind":"sample","t":12.5,"stream":"kube-api-http1-internal-lb-new-connections"}\n'


def seconds_per_mib(directory: Path, mib: int) -> float:
    path = directory / f"events.jsonl.{mib:06d}.gz"
    count = (mib << 20) // len(LINE)
    path.write_bytes(gzip.compress(LINE * count, compresslevel=1))
    started = time.process_time()
    lines = sum(1 for _ in SegmentLines(path))
    spent = time.process_time() - started
    assert lines == count
    return spent / mib


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        figures = {mib: seconds_per_mib(Path(tmp), mib) for mib in (16, 64, 256)}
    for mib, per in figures.items():
        print(f"{mib:4d} MiB: {per * 1000:.1f} ms CPU per MiB")
    print(f"ratio 256 MiB / 16 MiB, per MiB: {figures[256] / figures[16]:.2f} (1.0 = linear)")


if __name__ == "__main__":
    main()
