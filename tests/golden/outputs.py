"""Every output format of the report and audit commands, drawn from one committed event log.

The fixture (`fixture/`) is a real lab run: `prober lab --scenario slow-lb --platform gcp
--interval 500ms --workers 1`, its event log and its three apiservers' audit logs, gzipped.
`render` runs each command on it, in-process, in a scratch directory (named `<scratch>`
where an output names a file by its absolute path), and returns every file written and
every command's exit code and printed lines.
`expected/` holds what they were when an issue last changed an output on purpose.

When a change alters an output on purpose, write the new files and review their diff:

    make golden        # = .venv/bin/python -m tests.golden.outputs --update
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
from pathlib import Path

from prober.cli import main

HERE = Path(__file__).parent
FIXTURE = HERE / "fixture"
EXPECTED = HERE / "expected"

EVENTS = "in/events.jsonl.gz"
# (name of its stdout file, the command line). Each later command may read what an earlier
# one wrote: thresholds read analyze's summary, recommend and dashboard read thresholds.
COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("analyze", ["analyze", EVENTS, "--out", "analyze"]),
    ("origin", ["origin", "--events", EVENTS, "--out", "origin", "--label", "release=4.21"]),
    ("export", ["export", "analyze/summary.json", "-o", "rows.jsonl"]),
    (
        "thresholds",
        ["thresholds", "--min-runs", "1", "analyze/summary.json", "--out", "thresholds"],
    ),
    (
        "check",
        [
            "thresholds",
            "--check",
            "thresholds/thresholds.json",
            "analyze/summary.json",
            "--out",
            "check",
        ],
    ),
    (
        "recommend",
        ["recommend", "--thresholds", "thresholds/thresholds.json", "--out", "recommend"],
    ),
    ("dashboard", ["dashboard", "thresholds/thresholds.json", "--out", "dashboard"]),
    (
        "audit",
        ["audit", "summarize", "in/audit", "--events", EVENTS, "--out", "audit", "--junit"],
    ),
)


def render(scratch: Path) -> dict[str, bytes]:
    """Every output, by its path relative to `scratch`; exit code, stdout and stderr
    as `stdout/<name>.txt`."""
    shutil.copytree(FIXTURE, scratch / "in")
    outputs: dict[str, bytes] = {}
    with contextlib.chdir(scratch):
        for name, argv in COMMANDS:
            printed, warned = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(warned):
                code = main(argv)
            text = (
                f"$ prober {' '.join(argv)}\nexit {code}\n{printed.getvalue()}"
                f"--- stderr\n{warned.getvalue()}"
            )
            outputs[f"stdout/{name}.txt"] = text.encode()
    for path in sorted(scratch.rglob("*")):
        relative = path.relative_to(scratch)
        if path.is_file() and relative.parts[0] != "in":
            outputs[relative.as_posix()] = path.read_bytes()
    # The audit summary names the files it read by their absolute path.
    here = str(scratch.resolve()).encode()
    return {name: data.replace(here, b"<scratch>") for name, data in outputs.items()}


def update(scratch: Path) -> list[str]:
    """Write `expected/` anew; the paths written."""
    shutil.rmtree(EXPECTED, ignore_errors=True)
    written = []
    for name, data in render(scratch).items():
        target = EXPECTED / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(name)
    return written


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.outputs", description=__doc__)
    parser.add_argument("--update", action="store_true", help="write expected/ anew")
    args = parser.parse_args(argv)
    if not args.update:
        parser.print_help()
        return 2
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        written = update(Path(scratch))
    print(f"wrote {len(written)} files into {EXPECTED}")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
